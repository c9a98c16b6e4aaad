from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.datasets.models import Dataset
from studio.environments.models import Environment
from studio.experiments import paths, services, specs
from studio.experiments.models import Experiment
from studio.lib.fields import BoundedPrimaryKeyRelatedField, IdField, StudioModelSerializer
from studio.lib.params import MAX_ID
from studio.lib.team_api import TeamField, TeamScopedViewSet, same_team
from studio.rubrics.models import Rubric
from studio.runs.api import RunSerializer
from studio.runs.models import KINDS
from trainers.spec import PRESETS, apply_preset

NO_DATASET = (
    "choose a dataset: only an experiment whose settings generate its prompts (data.procedural) runs without one"
)


class ExperimentSerializer(StudioModelSerializer):
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

    def validate(self, attrs):
        team = attrs.get("team") or self.instance.team
        if self.instance is not None and team.pk != self.instance.team_id:
            raise serializers.ValidationError({"team": "an experiment cannot move to another team"})
        same_team(team, dataset=attrs.get("dataset"), rubric=attrs.get("rubric"), environment=attrs.get("environment"))
        attrs.update(self._pinned(attrs))
        config = attrs.get("config", getattr(self.instance, "config", {})) or {}
        preset = attrs.get("preset", getattr(self.instance, "preset", ""))
        if preset and "preset" in attrs:
            config = apply_preset(config, preset)  # explicit algorithm keys win over the preset
        attrs["config"] = config
        probe = Experiment(**{**self._current(), **attrs})
        if probe.dataset is None and not probe.generates_prompts:
            raise serializers.ValidationError({"dataset": NO_DATASET})
        errors = {}
        # Refused where it is chosen, not at launch: rows a run would stop at, or a refused file.
        chosen = probe.dataset if not probe.generates_prompts else None
        if chosen is not None and (problem := chosen.choice_problem(probe.skips_invalid_rows)):
            errors["dataset"] = problem
        try:
            paths.validate_for_team(probe.spec_config(), team)
        except specs.SpecError as exc:
            errors.update(exc.errors)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs

    def _pinned(self, attrs) -> dict:
        """{environment_version}: the version asked for (it must exist); the latest for null or a newly
        chosen environment; else (left out) the one pinned before."""
        environment = attrs.get("environment", getattr(self.instance, "environment", None))
        if environment is None:
            return {"environment_version": None}
        asked = attrs.get("environment_version")
        if asked is not None:
            if not environment.versions.filter(number=asked).exists():
                raise serializers.ValidationError(
                    {"environment_version": f"{environment.name!r} has versions 1 to {environment.version}"}
                )
            return {"environment_version": asked}
        kept = "environment_version" not in attrs and getattr(self.instance, "environment_id", None) == environment.pk
        return {"environment_version": self.instance.environment_version if kept else environment.version}

    def _current(self) -> dict:
        if self.instance is None:
            return {}
        fields = ("team", "dataset", "rubric", "environment", "environment_version", "model_path", "preset", "config",
                  "name")  # fmt: skip
        return {f: getattr(self.instance, f) for f in fields}

    def get_spec(self, experiment: Experiment) -> dict | None:
        try:
            return specs.validate(experiment.spec_config())
        except specs.SpecError:
            return None


class LaunchSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=KINDS, default="train")
    name = serializers.CharField(required=False, allow_blank=True)
    checkpoint = IdField(required=False, help_text="Checkpoint id to evaluate (kind=eval).")
    overrides = serializers.DictField(required=False, help_text="RunSpec values to change for this run only.")

    def validate_overrides(self, value):
        return sections_checked(value)


class CloneSerializer(serializers.Serializer):
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
        serializer.save(created_by=request.user, preset=source.preset)
        return Response(serializer.data, status=status.HTTP_201_CREATED)
