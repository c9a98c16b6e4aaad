"""What every team-owned API resource shares (datasets, rubrics, experiments): querysets limited to the user's teams,
reads for members, writes for owners/editors, 404 for everyone else."""

from __future__ import annotations

from django.db.models import ProtectedError
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.permissions import IsAuthenticated

from studio.accounts import permissions as perms
from studio.accounts.models import Team
from studio.lib.api_schema import ErrorSerializer, error, id_parameter
from studio.lib.errors import Conflict
from studio.lib.fields import BoundedPrimaryKeyRelatedField
from studio.lib.params import QueryError, as_id, id_param


@extend_schema_view(list=extend_schema(parameters=[id_parameter("team", "Only this team's.")]))
class TeamScopedViewSet(viewsets.ModelViewSet):
    permission_classes = [IsAuthenticated, perms.TeamRole]
    model = None  # set by subclasses
    error_responses = {
        "create": {"404": OpenApiResponse(ErrorSerializer, description="No team of yours has this id.")},
        "destroy": {"409": error("Experiments still use it: delete them or change what they use first.")},
    }

    def get_queryset(self):
        queryset = perms.visible(self.model.objects.all(), self.request.user).distinct()
        team = query_id(self.request.query_params, "team")
        if team is not None:
            queryset = queryset.filter(team_id=team)
        return queryset.order_by("-pk")

    def create(self, request, *args, **kwargs):
        # The team is checked before the body: an outsider naming the team gets 404, as for
        # everything of the team (TeamField alone answers 400 "does not exist"), and a viewer
        # gets 403 whatever else is wrong with the body.
        team_id = as_id(request.data.get("team")) if hasattr(request.data, "get") else None
        if team_id is not None:  # a missing or malformed team is the serializer's 400
            perms.require(request.user, team_id, perms.EDIT)
        return super().create(request, *args, **kwargs)

    def perform_create(self, serializer) -> None:
        perms.require(self.request.user, serializer.validated_data["team"], perms.EDIT)
        serializer.save(created_by=self.request.user)

    def perform_destroy(self, instance) -> None:
        delete_unused(instance)


class InUse(Conflict):
    """A dataset, rubric or environment that experiments still use: nothing was deleted (409)."""


def delete_unused(instance) -> None:
    """Delete `instance`, or InUse naming the experiments that still use it (a ProtectedError)."""
    try:
        instance.delete()
    except ProtectedError as exc:
        raise InUse(in_use_message(type(instance), exc)) from None


def in_use_message(model, exc: ProtectedError) -> str:
    """'this dataset is used by experiments "A" (id 3), "B" (id 5); ...' from a ProtectedError."""
    users = sorted(exc.protected_objects, key=lambda obj: obj.pk)
    meta = users[0]._meta if users else model._meta
    kind = meta.verbose_name if len(users) == 1 else meta.verbose_name_plural
    names = ", ".join(f'"{obj}" (id {obj.pk})' for obj in users)
    noun = model._meta.verbose_name
    return f"this {noun} is used by {kind} {names}; delete them or change their {noun} first"


class TeamField(BoundedPrimaryKeyRelatedField):
    """A team the user belongs to (others read as 'does not exist')."""

    def get_queryset(self):
        request = self.context.get("request")
        return perms.visible_teams(request.user) if request else Team.objects.none()


def query_id(params, name: str) -> int | None:
    """`?<name>=` as an id (None when absent or empty), or a 400 naming the parameter."""
    try:
        return id_param(params, name)
    except QueryError as exc:
        raise serializers.ValidationError({exc.field: [str(exc)]}) from None
