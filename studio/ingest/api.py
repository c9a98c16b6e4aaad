"""The ingest API: runs trained outside the studio, written with a run token.

    POST /api/ingest/runs/                        an editor makes a run of the team (source trl | verl | api)
                                                  and gets its first run token, shown once
    POST /api/ingest/runs/<run>/tokens/           an editor gets another token for an ingested run
    POST /api/ingest/tokens/<id>/revoke/          an editor revokes one
    POST /api/ingest/runs/<run>/batches/          the trainer writes a batch: `Authorization: Bearer <run token>`
    POST /api/ingest/verl/                        an editor uploads verl's dump files: a new run, imported

A run token writes to its run and nothing else: it reads nothing, and names any other run in vain
(404, as if it did not exist). User credentials (session, API token) never write batches: 401.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated, NotFound
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from rollout_client import verl
from studio.accounts import permissions as perms
from studio.experiments.models import Experiment
from studio.ingest import items, services
from studio.ingest.models import RunToken
from studio.lib.api_schema import ErrorSerializer, error, id_parameter
from studio.lib.fields import FiniteDictField, IdField
from studio.lib.params import as_id
from studio.lib.parsers import BoundedJSONParser
from studio.runs.api import RunSerializer
from studio.runs.models import Run

DUMP_NAME = re.compile(r"^\d{1,10}\.jsonl$")  # verl's `<global_step>.jsonl`
ERROR_401 = OpenApiResponse(ErrorSerializer, description="No run token, or one that is wrong or revoked.")
NO_TEAM = {"post": {"404": OpenApiResponse(ErrorSerializer, description="No team of yours has this id.")}}


class RunTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <run token>`: request.auth is the token's RunToken row (request.user stays anonymous)."""

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != b"bearer":
            return None
        if len(header) != 2:
            raise AuthenticationFailed("the Authorization header is `Bearer <run token>`")
        try:
            token = header[1].decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("a run token is text") from None
        row = RunToken.live(token)
        if row is None:
            raise AuthenticationFailed("the run token is wrong or revoked")
        from django.contrib.auth.models import AnonymousUser

        return AnonymousUser(), row

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="run token"'


class RunTokenScheme(OpenApiAuthenticationExtension):
    target_class = RunTokenAuthentication
    name = "runToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A run token (rst_...): writes to its one run through the ingest API."}  # fmt: skip


class HoldsRunToken(BasePermission):
    def has_permission(self, request, view) -> bool:
        if not isinstance(request.auth, RunToken):
            raise NotAuthenticated("a run token is needed: `Authorization: Bearer <run token>`")
        return True


class TokenOut(serializers.Serializer):
    id = serializers.IntegerField()
    run = serializers.IntegerField()
    prefix = serializers.CharField(help_text="The token's first characters.")
    created = serializers.DateTimeField()
    revoked = serializers.DateTimeField(allow_null=True)
    last_used = serializers.DateTimeField(allow_null=True)
    token = serializers.CharField(allow_null=True, help_text="The token itself: in this answer only, never again.")


class NewRunIn(serializers.Serializer):
    team = IdField(help_text="A team in which you are an owner or editor.")
    experiment = IdField(
        required=False, allow_null=True, default=None, help_text="An experiment of the team to file it under."
    )
    name = serializers.CharField(max_length=200)
    source = serializers.ChoiceField(choices=items.EXTERNAL_SOURCES, default="api")
    settings = FiniteDictField(required=False, default=dict, help_text="The trainer's settings.")
    criteria = serializers.ListField(child=serializers.CharField(max_length=64), required=False, default=list,
                                     max_length=64, help_text="The names of its reward criteria.")  # fmt: skip
    total_steps = serializers.IntegerField(required=False, default=0, min_value=0, max_value=items.MAX_STEP)


NEW_RUN = inline_serializer("IngestedRun", {
    "run": RunSerializer(),
    "token": serializers.CharField(help_text="Its run token: in this answer only, never again."),
    "token_id": serializers.IntegerField(),
    "batches_url": serializers.CharField(help_text="Where its trainer posts batches."),
})  # fmt: skip
BATCH_OUT = inline_serializer("IngestBatchAnswer", {
    "batch_id": serializers.CharField(allow_null=True),
    "duplicate": serializers.BooleanField(help_text="The batch id was stored before: nothing was written again."),
    "stored": serializers.DictField(child=serializers.IntegerField(),
                                    help_text="Rows the batch stored: metrics, rollouts, logs, and skipped_metrics / "
                                    "skipped_rollouts already stored under the same keys."),
    "run": inline_serializer("IngestRunState", {
        "id": serializers.IntegerField(), "state": serializers.CharField(), "last_step": serializers.IntegerField(),
        "cancel_requested": serializers.BooleanField(),
    }),
})  # fmt: skip


class BatchDoc(serializers.Serializer):
    batch_id = serializers.RegexField(items.BATCH_ID, required=False, help_text=items.BATCH_ID_HELP)
    items = serializers.ListField(child=serializers.DictField(), max_length=items.MAX_ITEMS, help_text=(
        "Each a dict with `kind`: metrics {step, values, wall_time?}; rollouts {step, rollouts: [{prompt, completion, "
        "reward, scores?, advantage?, prompt_id?, sample_index?, num_tokens?, finish_reason?, split?, trained?, "
        "logprobs?}]}; episodes {step, episodes: [{prompt, turns: [{text, tool_calls?, observation?, reward?, ...}], "
        "reward, ...}]}; status {state: running|succeeded|failed|cancelled, detail?}; log {lines}; settings "
        "{settings, criteria?, total_steps?}."
    ))  # fmt: skip


def _team_for(user, team_id: int, experiment_id: int | None):
    """(team, experiment) a user may make an ingested run in: 404 outsiders, 403 viewers, 400 a foreign experiment."""
    perms.require(user, team_id, perms.EDIT)
    team = perms.visible_teams(user).get(pk=team_id)
    experiment = None
    if experiment_id is not None:
        experiment = Experiment.objects.filter(pk=experiment_id, team=team).first()
        if experiment is None:
            raise serializers.ValidationError({"experiment": "no experiment of this team has this id"})
    return team, experiment


class IngestRunsView(APIView):
    permission_classes = [IsAuthenticated]
    error_responses = NO_TEAM

    @extend_schema(request=NewRunIn, responses={201: NEW_RUN})
    def post(self, request: Request) -> Response:
        """A run trained outside the studio, and its first run token (shown in this answer only)."""
        team_id = as_id(request.data.get("team")) if hasattr(request.data, "get") else None
        if team_id is not None:  # an outsider naming the team gets 404 whatever else is wrong
            perms.require(request.user, team_id, perms.EDIT)
        data = NewRunIn(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        team, experiment = _team_for(request.user, body["team"], body["experiment"])
        run, token = services.create_run(
            team, request.user, name=body["name"], source=body["source"], experiment=experiment,
            settings=body["settings"], criteria=body["criteria"], total_steps=body["total_steps"],
        )  # fmt: skip
        row = run.ingest_tokens.get()
        return Response({"run": RunSerializer(run).data, "token": token, "token_id": row.pk,
                         "batches_url": f"/api/ingest/runs/{run.pk}/batches/"}, status=status.HTTP_201_CREATED)  # fmt: skip


class RunTokensView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[id_parameter("run_id", "An ingested run.", OpenApiParameter.PATH)], request=None,
                   responses={201: TokenOut, 409: error("The run was trained by the studio: it takes no run token.")})  # fmt: skip
    def post(self, request: Request, run_id: int) -> Response:
        """Another run token for an ingested run (shown in this answer only)."""
        run = get_object_or_404(Run, pk=run_id)
        perms.check(request.user, run, perms.EDIT)
        if not run.is_external:
            return Response(
                {"detail": "the studio trains this run: only an ingested run takes a run token"}, status=409
            )
        row, token = RunToken.issue(run, request.user)
        return Response({**row.summary(), "token": token}, status=status.HTTP_201_CREATED)


class RevokeRunTokenView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[id_parameter("token_id", "The run token.", OpenApiParameter.PATH)], request=None,
                   responses=TokenOut)  # fmt: skip
    def post(self, request: Request, token_id: int) -> Response:
        """Revoke a run token: its next batch is refused (401)."""
        row = get_object_or_404(RunToken.objects.select_related("run"), pk=token_id)
        perms.check(request.user, row.run, perms.EDIT)
        row.revoke()
        return Response({**row.summary(), "token": None})


class BatchesView(APIView):
    authentication_classes = [RunTokenAuthentication]
    permission_classes = [HoldsRunToken]
    error_responses = {"post": {
        "401": ERROR_401,
        "404": OpenApiResponse(ErrorSerializer, description="The token is not this run's."),
        "409": error("The run has ended (finished, or stopped in the studio), or the batch id was used for another batch."),
    }}  # fmt: skip

    @extend_schema(parameters=[id_parameter("run_id", "The token's run.", OpenApiParameter.PATH)], request=BatchDoc,
                   responses={200: BATCH_OUT})  # fmt: skip
    def post(self, request: Request, run_id: int) -> Response:
        """Write one batch to the token's run. A batch id is stored once: sent again (a retry after a dropped
        connection), it answers `duplicate: true` and writes nothing."""
        token: RunToken = request.auth
        if token.run_id != run_id:
            raise NotFound("not found")
        body = items.BatchIn(data=request.data)
        body.is_valid(raise_exception=True)
        answer = services.ingest(run_id, body.validated_data.get("batch_id"), body.validated_data["items"])  # 409s
        RunToken.objects.filter(pk=token.pk).update(last_used=timezone.now())
        return Response(answer)


class VerlUploadIn(serializers.Serializer):
    team = IdField(help_text="A team in which you are an owner or editor.")
    experiment = IdField(required=False, allow_null=True, default=None)
    name = serializers.CharField(max_length=200)
    rollout_files = serializers.ListField(child=serializers.FileField(), required=False, default=list, max_length=100_000,
                                          help_text="trainer.rollout_data_dir's <step>.jsonl files.")  # fmt: skip
    validation_files = serializers.ListField(child=serializers.FileField(), required=False, default=list,
                                             max_length=100_000, help_text="trainer.validation_data_dir's <step>.jsonl files.")  # fmt: skip
    metrics_file = serializers.FileField(required=False, allow_null=True, default=None,
                                         help_text="verl's `file` logger output (VERL_FILE_LOGGER_PATH): {step, data} lines.")  # fmt: skip

    def validate(self, attrs):
        if not attrs["rollout_files"] and not attrs["validation_files"]:
            raise serializers.ValidationError({"rollout_files": "upload verl's rollout or validation dump files"})
        for field in ("rollout_files", "validation_files"):
            for upload in attrs[field]:
                if not DUMP_NAME.match(Path(upload.name).name):
                    raise serializers.ValidationError({field: f"{upload.name}: verl names its dumps <step>.jsonl"})
        return attrs


class VerlUploadView(APIView):
    permission_classes = [IsAuthenticated]
    error_responses = NO_TEAM
    # JSON carries no file: answered 400, after the role is checked
    parser_classes = [MultiPartParser, BoundedJSONParser]

    @extend_schema(request={"multipart/form-data": VerlUploadIn}, responses={201: inline_serializer("VerlImport", {
        "run": RunSerializer(),
        "imported": serializers.DictField(child=serializers.IntegerField(), help_text="batches, metrics, rollouts."),
    })})  # fmt: skip
    def post(self, request: Request) -> Response:
        """A new run (source verl) from verl's rollout / validation dump files, imported and ended."""
        team_id = as_id(request.data.get("team"))
        if team_id is not None:
            perms.require(request.user, team_id, perms.EDIT)
        data = VerlUploadIn(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        team, experiment = _team_for(request.user, body["team"], body["experiment"])
        with tempfile.TemporaryDirectory(prefix="verl-") as folder:
            places = {}
            for field in ("rollout_files", "validation_files"):
                place = Path(folder) / field
                place.mkdir()
                for upload in body[field]:
                    with open(place / Path(upload.name).name, "wb") as out:
                        for chunk in upload.chunks():
                            out.write(chunk)
                places[field] = [place] if body[field] else []
            metrics = None
            if body["metrics_file"] is not None:
                metrics = Path(folder) / "metrics.jsonl"
                metrics.write_bytes(body["metrics_file"].read())
            try:
                with transaction.atomic():  # a file that is not a dump leaves no run behind
                    run, _ = services.create_run(
                        team, request.user, name=body["name"], source="verl", experiment=experiment
                    )
                    imported = services.import_verl(run, rollouts=places["rollout_files"],
                                                    validation=places["validation_files"], metrics=metrics)  # fmt: skip
            except (verl.DumpError, UnicodeDecodeError) as exc:
                return Response({"detail": f"not a verl dump: {exc}"}, status=status.HTTP_400_BAD_REQUEST)
        return Response({"run": RunSerializer(run).data, "imported": imported}, status=status.HTTP_201_CREATED)
