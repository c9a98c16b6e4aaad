from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import action, api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.experiments import paths
from studio.lib.api_schema import error
from studio.lib.fields import JSONField, StudioModelSerializer
from studio.lib.team_api import TeamField, TeamScopedViewSet
from studio.rubrics.models import Rubric
from studio.rubrics.scoring import TryError, rubric_warnings, spec_to_try, try_rubric, validate_rubric
from trainers.rewards.catalog import CRITERION_KINDS
from trainers.spec import RubricSpec


class RubricSerializer(StudioModelSerializer):
    json_schemas = {"spec": RubricSpec}  # the API schema describes `spec` with it (studio.lib.api_schema)
    team = TeamField()
    warnings = serializers.SerializerMethodField(
        help_text='{"criteria.<i>.params.<name>": why}: valid settings worth a second look (e.g. a regex '
        "with nested quantifiers). Saved anyway."
    )

    class Meta:
        model = Rubric
        fields = ["id", "team", "name", "description", "spec", "warnings", "created", "updated"]

    def get_warnings(self, rubric: Rubric) -> dict[str, str]:
        return rubric_warnings(rubric.spec)

    def validate_spec(self, value):
        try:
            return validate_rubric(value)
        except TryError as exc:  # keyed under "spec" by DRF already: {"spec": {"criteria.0.params.pattern": ...}}
            raise serializers.ValidationError({k.removeprefix("spec."): v for k, v in exc.errors.items()}) from None

    def validate_team(self, value):
        if self.instance is not None and value.pk != self.instance.team_id:
            raise serializers.ValidationError("a rubric cannot move to another team")
        return value

    def validate(self, attrs):
        team = attrs.get("team") or self.instance.team
        errors = paths.rubric_errors(attrs.get("spec") or {}, team)
        if errors:
            raise serializers.ValidationError({f"spec.{k}": v for k, v in errors.items()})
        return attrs


class RubricTrySerializer(serializers.Serializer):
    json_schemas = {"spec": RubricSpec}
    pairs = serializers.ListField(child=serializers.DictField(), help_text="[{prompt, completion, answer?, ...}]")
    spec = JSONField(
        required=False, help_text="Score with this (unsaved) rubric instead; needs the owner or editor role."
    )


TRY_RESULTS = inline_serializer("RubricTryResults", {"results": serializers.ListField(child=inline_serializer(
    "RubricTryResult", {
        "reward": serializers.FloatField(), "passed": serializers.BooleanField(allow_null=True),
        "error": serializers.CharField(allow_null=True),
        "scores": serializers.DictField(child=serializers.DictField(), help_text="{criterion: {score, explanation, error}}"),
    }), help_text="One per pair, in order.")})  # fmt: skip
KINDS = OpenApiResponse(OpenApiTypes.OBJECT, description="{kind: {description, params: the JSON schema of its params}}")


class RubricViewSet(TeamScopedViewSet):
    """Rubrics: weighted criteria of every kind in trainers.rewards.catalog; `try` scores pairs on a worker.

    Members of any role may try the saved rubric; an unsaved `spec` may hold code, so it needs edit rights.
    """

    model = Rubric
    serializer_class = RubricSerializer
    read_only_actions = ("try_it",)

    @extend_schema(request=RubricTrySerializer, responses={
        200: TRY_RESULTS,
        403: error("An unsaved spec needs the owner or editor role (or: not signed in)."),
        502: error("Scoring failed on the worker."),
        504: error("No worker answered in time; says why as far as the studio can tell."),
    })  # fmt: skip
    @action(detail=True, methods=["post"], url_path="try", serializer_class=RubricTrySerializer)
    def try_it(self, request, pk=None):
        rubric = self.get_object()  # members may try the saved rubric (it changes nothing)
        data = RubricTrySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        may_edit = perms.has_role(request.user, rubric.team_id, perms.EDIT)
        # TryError: its status (400, 403, 502, 504) and {field: why} (studio.lib.errors)
        spec = spec_to_try(rubric.spec, data.validated_data.get("spec"), may_edit)
        return Response(try_rubric(spec, data.validated_data["pairs"], team=rubric.team))


@extend_schema(responses={200: KINDS})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def criterion_kinds(request):
    """Each criterion kind with the JSON schema of its parameters."""
    return Response({kind: {"description": (model.__doc__ or "").strip(), "params": model.model_json_schema()}
                     for kind, model in CRITERION_KINDS.items()})  # fmt: skip
