from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.datasets.models import Dataset
from studio.environments.models import Environment
from studio.experiments import services, specs
from studio.experiments.models import Experiment
from studio.lib.api_schema import partial_run_spec
from studio.lib.fields import BoundedPrimaryKeyRelatedField, IdField, StudioModelSerializer
from studio.lib.params import MAX_ID
from studio.lib.team_api import TeamField, TeamScopedViewSet
from studio.rubrics.models import Rubric
from studio.runs.api import RunSerializer
from studio.runs.models import KINDS
from trainers.spec import PRESETS


class ExperimentSerializer(StudioModelSerializer):
    """An experiment's fields parsed; the rules of what it may choose are services.settle's, which the view
    (and the experiment form) apply before saving."""

    json_schemas = {"config": partial_run_spec}  # the API schema describes `config` with it

    team = TeamField()
    dataset = BoundedPrimaryKeyRelatedField(
        queryset=Dataset.objects.all(), required=False, allow_null=True,
        help_text="The prompts' dataset; null only when the settings generate the prompts (config.data.procedural).",
    )  # fmt: skip
    rubric = BoundedPrimaryKeyRelatedField(queryset=Rubric.objects.all())
    environment = BoundedPrimaryKeyRelatedField(
        queryset=Environment.objects.all(), required=False, allow_null=True,
        help_text="Multi-turn environment; none: one turn per prompt.",
    )  # fmt: skip
    environment_version = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_ID,
        help_text="The environment version the experiment runs; null: the latest; left out: the version pinned "
        "before (the latest for a newly chosen environment).",
    )  # fmt: skip
    preset = serializers.ChoiceField(
        choices=["", *PRESETS], required=False, allow_blank=True,
        error_messages={"invalid_choice": "'{input}' is not a preset; known presets: " + ", ".join(PRESETS)},
    )  # fmt: skip
    spec = serializers.SerializerMethodField(help_text="The full validated RunSpec this experiment launches.")

    class Meta:
        model = Experiment
        fields = ["id", "team", "name", "description", "dataset", "rubric", "environment", "environment_version",
                  "model_path", "preset", "config", "spec", "created", "updated"]  # fmt: skip

    def validate_config(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError(f"must be an object of RunSpec sections, got {specs.json_type(value)}")
        errors = specs.section_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def get_spec(self, experiment: Experiment) -> dict | None:
        try:
            return specs.validate(experiment.spec_config())
        except specs.SpecError:
            return None


class LaunchSerializer(serializers.Serializer):
    json_schemas = {"overrides": partial_run_spec}
    kind = serializers.ChoiceField(choices=KINDS, default="train")
    name = serializers.CharField(required=False, allow_blank=True)
    checkpoint = IdField(required=False, help_text="Checkpoint id to evaluate (kind=eval).")
    overrides = serializers.DictField(required=False, help_text="RunSpec values to change for this run only.")

    def validate_overrides(self, value):
        return sections_checked(value)


class CloneSerializer(serializers.Serializer):
    json_schemas = {"config": partial_run_spec}
    name = serializers.CharField(required=False)
    config = serializers.DictField(required=False, help_text="Settings merged into the copy's.")

    def validate_config(self, value):
        return sections_checked(value)


def sections_checked(value: dict) -> dict:
    """`value` if each RunSpec section it names is an object, else a 400 naming the section."""
    errors = specs.section_errors(value)
    if errors:
        raise serializers.ValidationError(errors)
    return value


class ExperimentViewSet(TeamScopedViewSet):
    """Experiments: dataset + rubric + model + preset + settings; `launch` starts a run, `clone` copies."""

    model = Experiment
    serializer_class = ExperimentSerializer

    def perform_create(self, serializer) -> None:
        settled = services.settle(serializer.validated_data)  # ExperimentRefused: 400 naming the field
        perms.require(self.request.user, serializer.validated_data["team"], perms.EDIT)
        serializer.save(created_by=self.request.user, **settled)

    def perform_update(self, serializer) -> None:
        serializer.save(**services.settle(serializer.validated_data, serializer.instance))

    @extend_schema(request=LaunchSerializer, responses={201: RunSerializer})
    @action(detail=True, methods=["post"], serializer_class=LaunchSerializer)
    def launch(self, request, pk=None):
        experiment = self.get_object()
        perms.check(request.user, experiment, perms.EDIT)
        data = LaunchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        options = data.validated_data
        # LaunchError: 400 naming each field (studio.lib.errors)
        run = services.launch(experiment, request.user, kind=options["kind"], name=options.get("name") or "",
                              checkpoint_id=options.get("checkpoint"), overrides=options.get("overrides"))  # fmt: skip
        return Response(RunSerializer(run, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=CloneSerializer, responses={201: ExperimentSerializer})
    @action(detail=True, methods=["post"], serializer_class=CloneSerializer)
    def clone(self, request, pk=None):
        source = self.get_object()
        perms.check(request.user, source, perms.EDIT)
        data = CloneSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        payload = {
            "team": source.team_id, "dataset": source.dataset_id, "rubric": source.rubric_id,
            "environment": source.environment_id, "environment_version": source.environment_version,
            "model_path": source.model_path, "description": services.clone_description(source),
            "name": data.validated_data.get("name") or services.clone_name(source),
            "config": specs.deep_merge(source.config, data.validated_data.get("config") or {}),
        }  # fmt: skip
        serializer = ExperimentSerializer(data=payload, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        settled = services.settle(serializer.validated_data)
        serializer.save(created_by=request.user, preset=source.preset, **settled)
        return Response(serializer.data, status=status.HTTP_201_CREATED)
