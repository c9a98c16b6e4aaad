"""Team actions, one function each, called by both the API and the teams page."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from studio.accounts.models import LAST_OWNER, OWNER, ROLES, Membership, Team
from studio.lib.errors import FieldErrors


class TeamActionError(FieldErrors, ValueError):
    """An action the input does not allow; `field` names the input at fault ("detail": the whole request).
    The API answers 400 {field: [message]}, or {"detail": message}."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__({field: message}, message=message)
        self.field = field
        self.listed = field != "detail"  # "detail" is the request as a whole: one message, as DRF answers it


@transaction.atomic
def create_team(name: str, owner) -> Team:
    """A new team with `owner` as its first owner."""
    name = name.strip()
    if not name:
        raise TeamActionError("name", "a team needs a name")
    if Team.objects.filter(name=name).exists():
        raise TeamActionError("name", f"a team named {name!r} exists already; choose another name")
    team = Team.objects.create(name=name)
    team.add_member(owner, OWNER)
    return team


def add_member(team: Team, username: str, role: str) -> Membership:
    """Add the user to the team with this role, or change their role (the caller checked MANAGE)."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise TeamActionError("username", "no such user")
    if role not in dict(ROLES):
        raise TeamActionError("role", f"unknown role {role!r}; choose one of {', '.join(dict(ROLES))}")
    if role != OWNER and team.is_last_owner(user):
        raise TeamActionError("role", LAST_OWNER)
    return team.add_member(user, role)


def remove_member(team: Team, membership: Membership) -> None:
    if team.is_last_owner(membership.user):
        raise TeamActionError("detail", LAST_OWNER)
    membership.delete()
