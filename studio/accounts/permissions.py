"""Who may do what. Every page, API endpoint and the websocket consumer ask here, and only here.

Rules (tests/studio/test_permission_matrix.py walks every endpoint and the websocket against them):
- members of a team (owner, editor, viewer) see the team's datasets, rubrics,
  experiments and runs;
- owners and editors also create, edit, launch, cancel and delete them;
- owners alone manage the team's members;
- everyone else gets 404, as if the object did not exist (no 403 that would leak it).
A member who lacks the role for an action gets 403.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import Http404
from rest_framework import permissions

from studio.accounts.models import EDIT_ROLES, OWNER, Membership, Team
from studio.lib.params import MAX_ID

VIEW = "view"
EDIT = "edit"
MANAGE = "manage"


def role_allows(role: str | None, need: str) -> bool:
    if role is None:
        return False
    if need == VIEW:
        return True
    if need == EDIT:
        return role in EDIT_ROLES
    if need == MANAGE:
        return role == OWNER
    raise ValueError(f"unknown permission {need!r}")


def visible_teams(user) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user)


def editable_teams(user) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user, memberships__role__in=EDIT_ROLES)


def visible(queryset: QuerySet, user) -> QuerySet:
    """Objects (with a `team` field) whose team the user belongs to."""
    if not user.is_authenticated:
        return queryset.none()
    return queryset.filter(team__memberships__user=user)


def role_in(user, team_id: int) -> str | None:
    """The user's role in the team with this id; None for no role, no such team, or an id no row can have."""
    if not user.is_authenticated or not isinstance(team_id, int) or not 1 <= team_id <= MAX_ID:
        return None
    return Membership.objects.filter(team_id=team_id, user=user).values_list("role", flat=True).first()


def has_role(user, team_id: int, need: str) -> bool:
    """Whether the user's role in the team allows `need` (one query)."""
    return role_allows(role_in(user, team_id), need)


def require(user, team: Team | int, need: str = VIEW) -> str:
    """The user's role in the team if it allows `need`; else Http404 for outsiders (and teams
    that do not exist) and PermissionDenied for members whose role is too low.

    Django's two exceptions serve both sides: pages turn them into 404/403 pages, and DRF's
    exception handler into 404/403 JSON answers."""
    role = role_in(user, team if isinstance(team, int) else team.pk)
    if role is None:
        raise Http404("not found")
    if not role_allows(role, need):
        raise PermissionDenied(f"your role ({role}) cannot {need} in this team")
    return role


def check(user, obj: Model, need: str = VIEW) -> str:
    """`require` for a team-owned object (or a team itself)."""
    return require(user, obj.pk if isinstance(obj, Team) else obj.team_id, need)


def get_for(user, queryset: QuerySet, pk, need: str = VIEW) -> Model:
    """The object with this pk if the user may `need` it: 404 for outsiders, 403 for too low a role."""
    try:
        obj = queryset.get(pk=pk)
    except (queryset.model.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("not found") from None
    check(user, obj, need)
    return obj


class TeamRole(permissions.BasePermission):
    """DRF: reads need membership, writes need owner/editor (the object's team)."""

    def has_object_permission(self, request, view, obj) -> bool:
        read_only = request.method in permissions.SAFE_METHODS or getattr(view, "action", None) in view_actions(view)
        need = VIEW if read_only else EDIT
        check(request.user, obj, need)
        return True


def view_actions(view) -> tuple[str, ...]:
    """POST actions that change nothing (a rubric's "try it"), open to viewers too."""
    return getattr(view, "read_only_actions", ())


def is_team_member(user) -> bool:
    """Whether the user belongs to any team: the fleet of workers is shared by every team."""
    return visible_teams(user).exists()


class AnyTeamMember(permissions.BasePermission):
    """DRF: members of any team (the fleet)."""

    message = "only members of a team may see the workers"

    def has_permission(self, request, view) -> bool:
        return is_team_member(request.user)
