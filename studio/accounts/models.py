"""Teams and their members. Every dataset, rubric, experiment and run belongs to a team."""

from __future__ import annotations

from django.conf import settings
from django.db import models

OWNER = "owner"
EDITOR = "editor"
VIEWER = "viewer"
ROLES = ((OWNER, "Owner"), (EDITOR, "Editor"), (VIEWER, "Viewer"))
EDIT_ROLES = (OWNER, EDITOR)
LAST_OWNER = "a team needs at least one owner: make another member owner first"


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def add_member(self, user, role: str) -> Membership:
        membership, _ = Membership.objects.update_or_create(team=self, user=user, defaults={"role": role})
        return membership

    def is_last_owner(self, user) -> bool:
        """Whether the user is the team's only owner: demoting or removing them would orphan it (one query)."""
        owners = list(self.memberships.filter(role=OWNER).values_list("user_id", flat=True)[:2])
        return owners == [user.pk]

    def role_of(self, user) -> str | None:
        """The user's role in this team, or None for outsiders (one query)."""
        if not user.is_authenticated:
            return None
        return self.memberships.filter(user=user).values_list("role", flat=True).first()


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=ROLES, default=VIEWER)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    @property
    def can_edit(self) -> bool:
        return self.role in EDIT_ROLES
