from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import action, api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.environments import trying
from studio.environments.configs import ConfigError, validate_environment
from studio.environments.models import Environment, EnvironmentVersion
from studio.experiments import paths
from studio.lib.api_schema import error
from studio.lib.fields import IdField, JSONField, StudioModelSerializer
from studio.lib.team_api import TeamField, TeamScopedViewSet
from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS, ToolsParams
from trainers.rollout.environments.system_prompt import DEFAULT, suggested_system_prompt
from trainers.spec import EnvironmentSpec


class EnvironmentSerializer(StudioModelSerializer):
    json_schemas = {"config": EnvironmentSpec}  # the API schema describes `config` with it (studio.lib.api_schema)
    team = TeamField()
    version = serializers.IntegerField(read_only=True, help_text="Goes up by one each time the config changes.")

    class Meta:
        model = Environment
        fields = ["id", "team", "name", "description", "config", "version", "created", "updated"]

    def validate_config(self, value):
        try:
            return validate_environment(value)
        except ConfigError as exc:  # keyed under "config" by DRF: {"config": {"params.tools": ...}}
            raise serializers.ValidationError(exc.errors) from None

    def validate_team(self, value):
        if self.instance is not None and value.pk != self.instance.team_id:
            raise serializers.ValidationError("an environment cannot move to another team")
        return value

    def validate(self, attrs):
        """The paths the config names (a search tool's documents) must be ones the team may read."""
        team = attrs.get("team") or getattr(self.instance, "team", None)
        errors = paths.environment_errors(attrs["config"], team) if "config" in attrs and team else {}
        if errors:
            raise serializers.ValidationError({f"config.{k}": v for k, v in errors.items()})
        return attrs

    def create(self, validated_data):
        environment = super().create({**validated_data, "version": 1})
        environment.record_version(validated_data.get("created_by"))
        return environment

    def update(self, instance, validated_data):
        changed = "config" in validated_data and validated_data["config"] != instance.config
        if changed:
            validated_data["version"] = instance.version + 1
        environment = super().update(instance, validated_data)
        if changed:
            environment.record_version(self.context["request"].user)
        return environment


class VersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = EnvironmentVersion
        fields = ["number", "config", "created"]


class EnvironmentTrySerializer(serializers.Serializer):
    json_schemas = {"config": EnvironmentSpec}
    rows = serializers.ListField(
        child=serializers.DictField(), help_text=f"Up to {trying.MAX_ROWS} rows: [{{prompt or messages, answer?, ...}}]"
    )
    model = serializers.CharField(required=False, allow_blank=True, help_text="Model folder or hub id.")
    checkpoint = IdField(required=False, help_text="Or a checkpoint id of one of the team's runs.")
    episodes = serializers.IntegerField(default=2, min_value=1, max_value=trying.MAX_EPISODES,
                                        help_text="Episodes per row.")  # fmt: skip
    config = JSONField(required=False, help_text="Try this (unsaved) config instead; needs the owner or editor role.")


TRY_EPISODES = inline_serializer("EnvironmentTryEpisodes", {
    "episodes": serializers.ListField(child=serializers.ListField(child=serializers.DictField()),
                                      help_text="Per row, per episode: {messages, turns, end_reason, error, final_text}."),
})  # fmt: skip
KINDS = OpenApiResponse(OpenApiTypes.OBJECT, description="{kind: {description, params: the JSON schema of its params}}")


class EnvironmentViewSet(TeamScopedViewSet):
    """Environments: a kind (trainers.rollout.environments.kinds) with its params and the episode limits;
    `try` runs a few episodes on a worker; `versions` lists every saved config.

    Members of any role may try the saved environment; an unsaved `config` may hold code, so it needs edit rights.
    """

    model = Environment
    serializer_class = EnvironmentSerializer
    read_only_actions = ("try_it",)

    @extend_schema(responses=VersionSerializer(many=True))
    @action(detail=True, methods=["get"], serializer_class=VersionSerializer, pagination_class=None)
    def versions(self, request, pk=None):
        environment = self.get_object()
        return Response(VersionSerializer(environment.versions.all(), many=True).data)

    @extend_schema(request=EnvironmentTrySerializer, responses={
        200: TRY_EPISODES,
        403: error("An unsaved config needs the owner or editor role (or: not signed in)."),
        502: error("The episodes failed on the worker."),
        504: error("No worker answered in time; says why as far as the studio can tell."),
    })  # fmt: skip
    @action(detail=True, methods=["post"], url_path="try", serializer_class=EnvironmentTrySerializer)
    def try_it(self, request, pk=None):
        environment = self.get_object()  # members may try the saved environment (it changes nothing)
        data = EnvironmentTrySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        options = data.validated_data
        may_edit = perms.has_role(request.user, environment.team_id, perms.EDIT)
        # TryError: its status (400, 403, 502, 504) and {field: why} (studio.lib.errors)
        config = trying.config_to_try(environment.config, options.get("config"), may_edit)
        model = trying.model_to_try(environment.team, options.get("model", ""), options.get("checkpoint"))
        return Response(
            trying.try_environment(config, model, options["rows"], options["episodes"], team=environment.team)
        )


@extend_schema(responses={200: KINDS})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def environment_kinds(request):
    """Each environment kind with the JSON schema of its parameters."""
    return Response({kind: {"description": entry.description.strip(), "params": entry.params_model.model_json_schema()}
                     for kind, entry in ENVIRONMENT_KINDS.items()})  # fmt: skip


class SystemPromptSerializer(serializers.Serializer):
    tools = serializers.ListField(
        child=serializers.DictField(), max_length=50,
        help_text='The tools chosen, as in a tools config: [{"kind": "calculator"}, {"kind": ..., "params": ...}]; '
        "entries that are not a valid tool are left out.",
    )  # fmt: skip
    answer = serializers.ChoiceField(["no_tool_call", "answer_tag"], default="no_tool_call",
                                     help_text="The tools environment's answer setting.")  # fmt: skip
    answer_tag = serializers.RegexField(ToolsParams.model_fields["answer_tag"].metadata[0].pattern, max_length=40,
                                        default="answer", help_text="Tag name for answer=answer_tag.")  # fmt: skip


SYSTEM_PROMPT = inline_serializer("SuggestedSystemPrompt", {
    "system_prompt": serializers.CharField(help_text="Names the tools and the answer format."),
    "default": serializers.CharField(help_text="The schema's default system prompt (what a form starts with)."),
})  # fmt: skip


@extend_schema(request=SystemPromptSerializer, responses={200: SYSTEM_PROMPT})
@api_view(["POST"])
@permission_classes([IsAuthenticated])
def tools_system_prompt(request):
    """The system prompt a tools environment starts from for these tools (the editor offers it); runs nothing."""
    data = SystemPromptSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    options = data.validated_data
    text = suggested_system_prompt(options["tools"], options["answer"], options["answer_tag"])
    return Response({"system_prompt": text, "default": DEFAULT})
