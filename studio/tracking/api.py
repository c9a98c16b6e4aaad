"""JSON API of experiment trackers.

    GET/POST   /api/teams/<id>/tracker-secrets/          list (members: names and kinds, never values) / set (owners)
    DELETE     /api/teams/<id>/tracker-secrets/<name>/   owners
    GET/PUT    /api/teams/<id>/mirror-settings/          the team's defaults: members read, owners write
    GET/PUT    /api/experiments/<id>/mirror-settings/    an experiment's: members read, owners and editors write
                                                         (pointing a tracker at another server: owners only)
    GET        /api/runs/<id>/mirrors/                   how each tracker of the run is doing: members

A secret's value is write-only: no answer, page or log line carries it back. Each secret is bound to the
server it was set for (`endpoint`) and is sent nowhere else; a save that moves a tracker to another server
clears the secrets bound to the old one and says so in `cleared` ({field: why}).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from studio.accounts import permissions as perms
from studio.accounts.models import Team
from studio.experiments.models import Experiment
from studio.lib.api_schema import id_parameter
from studio.runs.models import Run
from studio.tracking import services
from studio.tracking.models import TrackerSecret
from studio.tracking.schema import NAME_PATTERN, TRACKERS

TEAM_ID = id_parameter("team_id", "The team.", OpenApiParameter.PATH)
EXPERIMENT_ID = id_parameter("experiment_id", "The experiment.", OpenApiParameter.PATH)
RUN_ID = id_parameter("run_id", "The run.", OpenApiParameter.PATH)
SECRET_NAME = OpenApiParameter("name", str, OpenApiParameter.PATH, description="The secret's name.")


class SecretIn(serializers.Serializer):
    name = serializers.RegexField(NAME_PATTERN, max_length=100)
    kind = serializers.ChoiceField(choices=TRACKERS)
    endpoint = serializers.CharField(
        max_length=500, required=False, allow_blank=True, default="",
        help_text="The server the secret may be sent to (the tracker's URL); a W&B key's default: https://api.wandb.ai.",
    )  # fmt: skip
    value = serializers.CharField(max_length=4096, write_only=True, trim_whitespace=True,
                                  style={"input_type": "password"})  # fmt: skip


class SecretOut(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    endpoint = serializers.CharField(help_text="The server it is sent to, and only there (empty: none).")
    created = serializers.DateTimeField()
    updated = serializers.DateTimeField()
    created_by = serializers.CharField(allow_null=True)


def secret_out(secret: TrackerSecret) -> dict:
    return {"name": secret.name, "kind": secret.kind, "endpoint": secret.endpoint, "created": secret.created,
            "updated": secret.updated,
            "created_by": secret.created_by.username if secret.created_by else None}  # fmt: skip


SETTINGS = serializers.JSONField(help_text="MirrorSettings (studio.tracking.schema): trackio, wandb, mlflow, limits.")
CLEARED = serializers.DictField(
    child=serializers.CharField(), required=False,
    help_text="Secret fields this save cleared: they named a secret bound to the server a tracker moved away from.",
)  # fmt: skip
TEAM_SETTINGS = inline_serializer(
    "TeamMirrorSettings", {"team": serializers.IntegerField(), "settings": SETTINGS, "cleared": CLEARED}
)
EXPERIMENT_SETTINGS_IN = inline_serializer(
    "ExperimentMirrorSettingsIn",
    {"inherit": serializers.BooleanField(), "settings": serializers.JSONField(required=False)},
)
EXPERIMENT_SETTINGS = inline_serializer(
    "ExperimentMirrorSettings",
    {
        "experiment": serializers.IntegerField(),
        "inherit": serializers.BooleanField(),
        "settings": SETTINGS,
        "cleared": CLEARED,
    },  # fmt: skip
)
MIRRORS = inline_serializer("RunMirrors", {"results": serializers.ListField(child=serializers.DictField())})


def _team(user, team_id: int, need: str) -> Team:
    return perms.get_for(user, Team.objects.all(), team_id, need)


class TeamSecretsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[TEAM_ID], responses=inline_serializer("TrackerSecrets", {"results": SecretOut(many=True)})
    )
    def get(self, request: Request, team_id: int) -> Response:
        team = _team(request.user, team_id, perms.VIEW)
        return Response(
            {"results": [secret_out(s) for s in TrackerSecret.objects.filter(team=team).select_related("created_by")]}
        )

    @extend_schema(parameters=[TEAM_ID], request=SecretIn, responses={201: SecretOut})
    def post(self, request: Request, team_id: int) -> Response:
        team = _team(request.user, team_id, perms.MANAGE)
        data = SecretIn(data=request.data)
        data.is_valid(raise_exception=True)
        secret = services.set_secret(team, **data.validated_data, user=request.user)  # TrackingError: 400
        return Response(secret_out(secret), status=status.HTTP_201_CREATED)


class TeamSecretView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[TEAM_ID, SECRET_NAME], responses={204: None})
    def delete(self, request: Request, team_id: int, name: str) -> Response:
        team = _team(request.user, team_id, perms.MANAGE)
        deleted, _ = TrackerSecret.objects.filter(team=team, name=name).delete()
        if not deleted:
            raise NotFound(f"the team has no tracker secret named {name!r}")
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamMirrorSettingsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[TEAM_ID], responses=TEAM_SETTINGS)
    def get(self, request: Request, team_id: int) -> Response:
        team = _team(request.user, team_id, perms.VIEW)
        return Response({"team": team.pk, "settings": services.team_defaults(team).model_dump()})

    @extend_schema(parameters=[TEAM_ID], request=OpenApiTypes.OBJECT, responses=TEAM_SETTINGS)
    def put(self, request: Request, team_id: int) -> Response:
        team = _team(request.user, team_id, perms.MANAGE)
        saved = services.save_team_defaults(team, request.data)  # TrackingError: 400 {field: [why]}
        return Response({"team": team.pk, "settings": saved.settings.model_dump(), "cleared": saved.cleared})


class ExperimentMirrorSettingsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[EXPERIMENT_ID], responses=EXPERIMENT_SETTINGS)
    def get(self, request: Request, experiment_id: int) -> Response:
        experiment = perms.get_for(request.user, Experiment.objects.all(), experiment_id, perms.VIEW)
        inherit, chosen = services.experiment_settings(experiment)
        return Response({"experiment": experiment.pk, "inherit": inherit, "settings": chosen.model_dump()})

    @extend_schema(parameters=[EXPERIMENT_ID], request=EXPERIMENT_SETTINGS_IN, responses=EXPERIMENT_SETTINGS)
    def put(self, request: Request, experiment_id: int) -> Response:
        experiment = perms.get_for(request.user, Experiment.objects.all(), experiment_id, perms.EDIT)
        body = request.data if isinstance(request.data, dict) else {}
        inherit = body.get("inherit")
        if not isinstance(inherit, bool):
            raise ValidationError({"inherit": "must be true (use the team's defaults) or false (use `settings`)"})
        try:  # TrackingError: 400
            saved = services.save_experiment_settings(experiment, inherit, body.get("settings"), request.user)
        except services.MoveRefused as exc:
            raise PermissionDenied(str(exc)) from None
        return Response({"experiment": experiment.pk, "inherit": inherit, "settings": saved.settings.model_dump(),
                         "cleared": saved.cleared})  # fmt: skip


class RunMirrorsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[RUN_ID], responses=MIRRORS)
    def get(self, request: Request, run_id: int) -> Response:
        run = perms.get_for(request.user, Run.objects.all(), run_id, perms.VIEW)
        return Response({"results": services.statuses(run)})
