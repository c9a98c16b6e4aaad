"""A team's usage, as a page and as JSON (studio.runs.team_usage), for the team's members only (any role):

    GET /teams/<id>/usage/?from=YYYY-MM&to=YYYY-MM        the page: sums per user, per experiment, per month
    GET /api/teams/<id>/usage/?from=YYYY-MM&to=YYYY-MM    the same numbers
    GET /api/experiments/<id>/estimate/?runs=N            what N runs of the experiment will use (studio.runs.estimates)

An outsider gets 404, as for every team object. A share link opens no usage: what a team spends and the
operator's prices are the team's business, not a shared result's (studio.sharing shows curves and rollouts).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from studio.accounts import permissions as perms
from studio.accounts.models import Team
from studio.experiments.models import Experiment
from studio.lib.api_schema import id_parameter, int_parameter
from studio.lib.params import QueryError, number_param
from studio.runs import estimates
from studio.runs.team_usage import Period, team_usage
from studio.runs.usage import Prices

TEAM_ID = id_parameter("team_id", "The team.", OpenApiParameter.PATH)
MONTHS = [
    OpenApiParameter(name, OpenApiTypes.STR, description=f"{what} month counted, YYYY-MM (by the run's launch, UTC).")
    for name, what in (("from", "The first"), ("to", "The last"))
]


class UsageRow(serializers.Serializer):
    label = serializers.CharField(required=False, help_text="The user, experiment or month (YYYY-MM).")
    experiment = serializers.IntegerField(required=False, allow_null=True, help_text="by_experiment: its id.")
    runs = serializers.IntegerField()
    device_seconds = serializers.FloatField(help_text="Wall time of the runs' processes on their devices, summed.")
    gpu_seconds = serializers.FloatField()
    cpu_seconds = serializers.FloatField()
    tokens_generated = serializers.IntegerField()
    tokens_trained = serializers.IntegerField()
    cost = serializers.FloatField(allow_null=True, help_text="At the operator's prices; null where none is set.")


class UsageOut(serializers.Serializer):
    total = UsageRow()
    by_user = UsageRow(many=True)
    by_experiment = UsageRow(many=True)
    by_month = UsageRow(many=True)
    prices = inline_serializer("UsagePrices", {"gpu_hour": serializers.FloatField(),
                                               "cpu_hour": serializers.FloatField(),
                                               "currency": serializers.CharField(allow_null=True)})  # fmt: skip
    period = inline_serializer("UsagePeriod", {"from": serializers.CharField(required=False),
                                               "to": serializers.CharField(required=False)})  # fmt: skip


class TeamUsageView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[TEAM_ID, *MONTHS], responses=UsageOut)
    def get(self, request: Request, team_id: int) -> Response:
        team = perms.get_for(request.user, Team.objects.all(), team_id, perms.VIEW)
        return Response(team_usage(team, Period.from_query(request.query_params)))


@login_required
def team_usage_page(request: HttpRequest, team_id: int) -> HttpResponse:
    team = perms.get_for(request.user, Team.objects.all(), team_id, perms.VIEW)
    try:
        period, error = Period.from_query(request.GET), ""
    except QueryError as exc:  # said above the tables, which then count every month
        period, error = Period(), f"{exc.field}: {exc}"
    usage = team_usage(team, period)
    context = {"team": team, "usage": usage, "prices": Prices.from_settings(), "error": error,
               "period": usage["period"]}  # fmt: skip
    return render(request, "runs/usage.html", context, status=400 if error else 200)


class RunUsageSerializer(serializers.Serializer):
    """One run's usage (studio.runs.usage.of_run), in the run's API answer."""

    device_seconds = serializers.FloatField(help_text="Wall time of its processes on their devices, summed.")
    gpu_seconds = serializers.FloatField(help_text="The GPU part of device_seconds.")
    cpu_seconds = serializers.FloatField(help_text="The CPU part of device_seconds.")
    tokens_generated = serializers.IntegerField(help_text="Completion tokens its training steps sampled.")
    tokens_trained = serializers.IntegerField(help_text="Prompt + completion tokens its updates ran over.")
    cost = serializers.FloatField(allow_null=True, help_text="At the operator's prices; null where none is set.")
    currency = serializers.CharField(allow_null=True)
    attempts = serializers.IntegerField(help_text="Attempts recorded (1 + automatic restarts that started).")
    final = serializers.BooleanField(help_text="False while an attempt is still being recorded.")


MAX_RUNS = 1000
EXPERIMENT_ID = id_parameter("experiment_id", "The experiment.", OpenApiParameter.PATH)
RUNS = int_parameter("runs", "How many runs of its settings (a sweep's trials); 1 by default.", 1, MAX_RUNS)


class EstimateOut(serializers.Serializer):
    runs = serializers.IntegerField()
    steps = serializers.IntegerField(help_text="Per run: the settings' optim.total_steps.")
    processes = serializers.IntegerField(help_text="Per run.")
    max_tokens_generated = serializers.IntegerField(allow_null=True, help_text="The settings' bound, all runs.")
    max_tokens_trained = serializers.IntegerField(allow_null=True)
    tokens_generated = serializers.IntegerField(allow_null=True, help_text="From earlier runs; null: none.")
    tokens_trained = serializers.IntegerField(allow_null=True)
    device_seconds = serializers.FloatField(allow_null=True, help_text="From earlier runs; null: none.")
    gpu_seconds = serializers.FloatField(allow_null=True)
    cost = serializers.FloatField(allow_null=True)
    currency = serializers.CharField(allow_null=True)
    earlier_runs = serializers.IntegerField(help_text="The earlier runs it learned from.")
    basis = serializers.CharField(help_text="Where the numbers come from, in words.")


class ExperimentEstimateView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[EXPERIMENT_ID, RUNS], responses=EstimateOut)
    def get(self, request: Request, experiment_id: int) -> Response:
        experiment = perms.get_for(request.user, Experiment.objects.all(), experiment_id, perms.VIEW)
        runs = number_param(request.query_params, "runs", int)
        if runs is not None and not 1 <= runs <= MAX_RUNS:
            raise QueryError("runs", f"must be from 1 to {MAX_RUNS}, got {runs}")
        return Response(estimates.estimate(experiment, runs=runs or 1).as_dict())
