"""Sweeps over the API: /api/sweeps/ (create from an experiment, list, read, delete), /stop/, /importances/
and /trials/<number>/experiment/. Reads for the team's members, the rest for its owners and editors; others
get 404 (studio.lib.team_api)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.experiments.api import ExperimentSerializer
from studio.experiments.models import Experiment
from studio.lib.api_schema import error
from studio.lib.fields import BoundedPrimaryKeyRelatedField, StudioModelSerializer
from studio.lib.team_api import TeamScopedViewSet
from studio.sweeps import search, services
from studio.sweeps.models import DEFAULT_OBJECTIVE, LAST, MAXIMIZE, PRUNERS, SAMPLERS, TPE, Sweep, Trial


class TrialSerializer(StudioModelSerializer):
    run_state = serializers.CharField(source="run.state", default=None, read_only=True)
    pruned = serializers.CharField(source="pruned_note", read_only=True)
    gpu_seconds = serializers.FloatField(source="run.gpu_seconds", default=None, read_only=True)
    device_seconds = serializers.FloatField(source="run.device_seconds", default=None, read_only=True)

    class Meta:
        model = Trial
        fields = ["number", "run", "values", "state", "objective", "reported_step", "pruned", "pruned_at_step",
                  "run_state", "gpu_seconds", "device_seconds"]  # fmt: skip
        read_only_fields = fields


class SweepSerializer(StudioModelSerializer):
    experiment = BoundedPrimaryKeyRelatedField(queryset=Experiment.objects.all(),
                                               help_text="The experiment whose settings the sweep varies.")  # fmt: skip
    parameters = serializers.JSONField(help_text='[{"name": "optim.lr", "kind": "float", "low": 1e-5, "high": 1e-2, '
                                       '"log": true}, {"name": "algorithm.group_size", "kind": "int", "low": 2, '
                                       '"high": 8, "step": 2}, {"name": "...", "kind": "choice", "choices": [...]}]')  # fmt: skip
    objective = serializers.CharField(default=DEFAULT_OBJECTIVE, max_length=200,
                                      help_text="The metric key to optimise (default: the held-out reward).")  # fmt: skip
    direction = serializers.ChoiceField(choices=["maximize", "minimize"], default=MAXIMIZE)
    objective_at = serializers.ChoiceField(choices=["last", "best"], default=LAST,
                                           help_text="The trial's value: its last or best point after step 0.")  # fmt: skip
    sampler = serializers.ChoiceField(choices=list(SAMPLERS), default=TPE)
    pruner = serializers.ChoiceField(choices=list(PRUNERS), default="none")
    pruner_startup_trials = serializers.IntegerField(default=2, min_value=0, max_value=1000)
    seed = serializers.IntegerField(default=0, min_value=0, max_value=2**31 - 1)
    max_trials = serializers.IntegerField(default=10, min_value=1, max_value=services.MAX_TRIALS)
    max_concurrent = serializers.IntegerField(default=2, min_value=1, max_value=100)
    max_gpu_hours = serializers.FloatField(required=False, allow_null=True, min_value=0.001, max_value=1e6)
    summary = serializers.SerializerMethodField()
    trials = TrialSerializer(many=True, read_only=True)

    class Meta:
        model = Sweep
        fields = ["id", "team", "experiment", "name", "description", "parameters", "objective", "direction",
                  "objective_at", "sampler", "pruner", "pruner_startup_trials", "seed", "max_trials",
                  "max_concurrent", "max_gpu_hours", "state", "ended_because", "summary", "trials", "created"]  # fmt: skip
        read_only_fields = ["team", "state", "ended_because", "created"]
        extra_kwargs = {"name": {"required": False, "allow_blank": True}}

    def get_summary(self, sweep: Sweep) -> dict:
        return services.summary(sweep)


class SweepViewSet(TeamScopedViewSet):
    """Sweeps: an experiment's settings searched by Optuna, each trial an ordinary run of it."""

    model = Sweep
    serializer_class = SweepSerializer
    http_method_names = ["get", "post", "delete", "head", "options"]
    error_responses = {
        "create": {"404": error("No experiment of your teams has this id.")},
        "trial_experiment": {"400": error("The experiment's settings with the trial's values are refused (each "
                                          "field named).")},
    }  # fmt: skip

    def create(self, request, *args, **kwargs):
        serializer = SweepSerializer(data=request.data, context=self.get_serializer_context())
        experiment_id = request.data.get("experiment") if hasattr(request.data, "get") else None
        # The experiment is checked before the body: an outsider naming it gets 404, a viewer 403.
        experiment = perms.get_for(request.user, Experiment.objects.all(), experiment_id, perms.EDIT) \
            if experiment_id is not None else None  # fmt: skip
        serializer.is_valid(raise_exception=True)
        fields = {k: v for k, v in serializer.validated_data.items() if k != "experiment"}
        # Not in a transaction: Optuna writes its study through a connection of its own, which a write
        # transaction held by Django's (SQLite takes the lock at BEGIN) would block.
        sweep = services.create(experiment or serializer.validated_data["experiment"], request.user, fields)
        return Response(SweepSerializer(sweep, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)  # fmt: skip

    def perform_destroy(self, instance: Sweep) -> None:
        services.delete(instance)

    @extend_schema(request=None, responses={200: SweepSerializer})
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        sweep = self.get_object()
        return Response(SweepSerializer(services.stop(sweep), context=self.get_serializer_context()).data)

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, description="{parameter: importance}, each 0 to 1.")
    @action(detail=True, methods=["get"])
    def importances(self, request, pk=None):
        """{parameter: importance} (Optuna's fANOVA over the completed trials; {} before two differ)."""
        return Response(search.importances(self.get_object()))

    @extend_schema(request=None, responses={201: ExperimentSerializer})
    @action(detail=True, methods=["post"], url_path=r"trials/(?P<number>\d+)/experiment")
    def trial_experiment(self, request, pk=None, number=None):
        """A new experiment with the trial's values."""
        sweep = self.get_object()
        trial = sweep.trials.filter(number=int(number)).first() if len(number) < 10 else None
        if trial is None:
            raise NotFound("no such trial in this sweep")
        experiment = services.trial_experiment(trial, request.user, self.get_serializer_context())
        return Response(ExperimentSerializer(experiment, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)  # fmt: skip
