from rest_framework import permissions

from studio.accounts.permissions import visible_teams


def is_team_member(user) -> bool:
    """The fleet is shared by every team: any member of any team may see it (one query)."""
    return visible_teams(user).exists()


class TeamMember(permissions.BasePermission):
    message = "only members of a team may see the workers"

    def has_permission(self, request, view) -> bool:
        return is_team_member(request.user)
