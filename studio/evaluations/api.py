"""The suites API: suites (a team's tasks), their launch on checkpoints and base models, and suite runs with
their result table. Reads for members of the team, writes for owners and editors, 404 for everyone else
(studio.accounts.permissions), as for runs."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from pydantic import ValidationError
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.evaluations import services, suite_tasks, table
from studio.evaluations.models import Suite, SuiteRun, TrainingSuite
from studio.lib.api_schema import id_parameter
from studio.lib.fields import JSONField, StudioModelSerializer
from studio.lib.params import MAX_ID
from studio.lib.team_api import TeamField, TeamScopedViewSet, query_id
from trainers.spec import RolloutSpec, validation_errors


class SuiteSerializer(StudioModelSerializer):
    json_schemas = {"tasks": suite_tasks.tasks_schema, "rollout": RolloutSpec}
    team = TeamField()
    tasks = JSONField(help_text="[{name, dataset (id) or procedural, rubric (id), environment (id), "
                      "samples_per_prompt, num_prompts, pass_threshold, temperature, top_p, max_new_tokens}]")  # fmt: skip
    rollout = JSONField(required=False, help_text="Engine and default sampling settings (trainers.spec.RolloutSpec).")

    class Meta:
        model = Suite
        fields = ["id", "team", "name", "description", "tasks", "rollout", "seed", "created", "updated"]

    def validate_team(self, value):
        if self.instance is not None and value.pk != self.instance.team_id:
            raise serializers.ValidationError("a suite cannot move to another team")
        return value

    def validate_rollout(self, value):
        try:
            return RolloutSpec.model_validate(value).model_dump(mode="json", exclude_defaults=True)
        except ValidationError as exc:
            raise serializers.ValidationError(validation_errors(exc)) from None

    def validate(self, attrs):
        team = attrs.get("team") or self.instance.team
        tasks = attrs.get("tasks", self.instance.tasks if self.instance else None)
        try:
            suite_tasks.resolve(tasks, team)  # the team's objects, and every task a valid evaluation
        except suite_tasks.TasksRefused as exc:
            raise serializers.ValidationError(exc.errors) from None
        return attrs


class TrainingSuiteSerializer(StudioModelSerializer):
    team = TeamField()

    class Meta:
        model = TrainingSuite
        fields = ["id", "team", "experiment", "suite", "every_n_checkpoints", "created"]
        extra_kwargs = {"every_n_checkpoints": {"min_value": 1, "max_value": 1_000_000}}

    def validate(self, attrs):
        team = attrs.get("team") or self.instance.team
        if self.instance is not None and team.pk != self.instance.team_id:
            raise serializers.ValidationError({"team": "a training suite cannot move to another team"})
        for name in ("experiment", "suite"):
            chosen = attrs.get(name)
            if chosen is not None and chosen.team_id != team.pk:
                raise serializers.ValidationError({name: "must belong to the same team"})
        return attrs


class SuiteLaunchSerializer(serializers.Serializer):
    checkpoints = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID), required=False, max_length=services.MAX_MODELS,
        help_text="Checkpoint ids of the team's runs (a run's detail lists them).",
    )  # fmt: skip
    base_models = serializers.ListField(
        child=serializers.CharField(max_length=1000), required=False, max_length=services.MAX_MODELS,
        help_text="Base model paths (local folders or hub ids); the first is what the table's change is against.",
    )  # fmt: skip
    name = serializers.CharField(required=False, max_length=200)


class SuiteRunSerializer(serializers.ModelSerializer):
    state = serializers.SerializerMethodField(help_text="From its pairs' runs: queued, running, succeeded, failed...")

    class Meta:
        model = SuiteRun
        fields = ["id", "suite", "team", "name", "state", "created", "source_run", "source_step", "spec"]
        read_only_fields = fields

    def get_state(self, suite_run: SuiteRun) -> str:
        return suite_run.state


class SuiteRunDetailSerializer(SuiteRunSerializer):
    table = serializers.SerializerMethodField(help_text="Models x tasks: studio.evaluations.table.result_table.")

    class Meta(SuiteRunSerializer.Meta):
        fields = [*SuiteRunSerializer.Meta.fields, "table"]
        read_only_fields = fields

    def get_table(self, suite_run: SuiteRun) -> dict:
        return table.result_table(suite_run)


class SuiteViewSet(TeamScopedViewSet):
    """Evaluation suites: named tasks (dataset or procedural prompts, rubric, environment, k, sampling);
    `launch` runs one on checkpoints of the team's runs and base models."""

    model = Suite
    serializer_class = SuiteSerializer

    @extend_schema(request=SuiteLaunchSerializer, responses={201: SuiteRunSerializer})
    @action(detail=True, methods=["post"], serializer_class=SuiteLaunchSerializer)
    def launch(self, request, pk=None):
        """A suite run of every task on every model given: one evaluation run per (model, task) pair."""
        suite = self.get_object()  # TeamRole: a POST needs the edit role
        data = SuiteLaunchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        # LaunchRefused / TasksRefused: 400 naming each field
        suite_run = services.launch(suite, request.user, checkpoint_ids=data.validated_data.get("checkpoints", []),
                                    base_models=data.validated_data.get("base_models", []),
                                    name=data.validated_data.get("name", ""))  # fmt: skip
        return Response(SuiteRunSerializer(suite_run).data, status=status.HTTP_201_CREATED)


@extend_schema_view(list=extend_schema(parameters=[
    id_parameter("team", "Only this team's suite runs."), id_parameter("suite", "Only this suite's runs."),
    id_parameter("source_run", "Only the suite runs on this training run's checkpoints."),
]))  # fmt: skip
class SuiteRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Suite runs with their result table; `cancel` stops the pairs not yet ended."""

    serializer_class = SuiteRunSerializer
    permission_classes = [IsAuthenticated, perms.TeamRole]

    def get_queryset(self):
        rows = perms.visible(SuiteRun.objects.all(), self.request.user).distinct().prefetch_related("results__run")
        for name in ("team", "suite", "source_run"):
            value = query_id(self.request.query_params, name)
            if value is not None:
                rows = rows.filter(**{f"{name}_id": value})
        return rows.order_by("-created", "-pk")

    def get_serializer_class(self):
        return SuiteRunDetailSerializer if self.action == "retrieve" else super().get_serializer_class()

    @extend_schema(request=None, responses={200: SuiteRunSerializer})
    @action(detail=True, methods=["post"], serializer_class=serializers.Serializer)
    def cancel(self, request, pk=None):
        suite_run = services.cancel(self.get_object())  # TeamRole: a POST needs the edit role
        return Response(SuiteRunSerializer(suite_run).data)


class TrainingSuiteViewSet(TeamScopedViewSet):
    """An experiment's suite while it trains: every Nth checkpoint of its training runs is scored by the suite,
    and the scores become the run's curves suite/<task>/reward_mean, pass@1, pass@<k> at the checkpoint's step."""

    model = TrainingSuite
    serializer_class = TrainingSuiteSerializer
