"""`/api/runs/<id>/metrics/`: a run's curves, downsampled on the server.

The response's `cursor` is the run's latest event seq, read *before* the points: the page
connects to the websocket with `?after=cursor`, so a point written meanwhile arrives twice
at worst (the page drops it by step), never zero times.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from studio.lib.api_schema import SHARE, id_parameter, int_parameter
from studio.lib.params import QueryError, number_param
from studio.runs.access import readable_run
from studio.runs.downsample import DEFAULT_POINTS, MAX_POINTS
from studio.runs.series import X_COLUMNS, Window, metric_keys, run_series
from studio.sharing.share_view import ShareViewMixin


def window_from(params) -> Window:
    """The Window a query string asks for; a 400 naming the parameter when it is wrong."""
    try:
        points = number_param(params, "points", int)
        return Window(
            x=params.get("x") or "step",
            start=number_param(params, "start"),
            end=number_param(params, "end"),
            points=DEFAULT_POINTS if points is None else points,
            step_min=number_param(params, "step_min", int),
            step_max=number_param(params, "step_max", int),
        )
    except QueryError as err:
        raise ValidationError({err.field: str(err)}) from None
    except ValueError as err:
        raise ValidationError({"detail": str(err)}) from None


SERIES = inline_serializer("RunMetrics", {
    "cursor": serializers.IntegerField(help_text="The run's latest event seq, read before the points."),
    "x": serializers.CharField(),
    "keys": serializers.ListField(child=serializers.CharField(), help_text="Every metric key of the run."),
    "series": serializers.DictField(child=serializers.DictField(), help_text="{key: downsampled series}"),
})  # fmt: skip


class RunMetricsView(ShareViewMixin, APIView):
    # Access is decided by readable_run: team members, or anyone holding a live share link.
    permission_classes = [AllowAny]

    @extend_schema(parameters=[
        id_parameter("run_id", "The run.", OpenApiParameter.PATH),
        OpenApiParameter("x", str, enum=list(X_COLUMNS), description="The x axis; default step."),
        OpenApiParameter("start", float, description="The first x to include."),
        OpenApiParameter("end", float, description="The last x to include."),
        int_parameter("points", f"Buckets per series, 1 to {MAX_POINTS} (default {DEFAULT_POINTS}).", 1, MAX_POINTS),
        OpenApiParameter("step_min", int, description="The first step to include, whatever the x."),
        OpenApiParameter("step_max", int, description="The last step to include, whatever the x (a resumed run's "
                         "page draws the run it continues up to the step it resumed from)."),
        OpenApiParameter("keys", str, description="Metric keys separated by commas; default all."),
        SHARE,
    ], responses=SERIES)  # fmt: skip
    def get(self, request: Request, run_id: int) -> Response:
        run = readable_run(request, run_id)
        window = window_from(request.query_params)
        cursor = run.last_seq
        all_keys = metric_keys(run.pk)
        wanted = request.query_params.get("keys")
        keys = [k for k in wanted.split(",") if k in all_keys] if wanted else all_keys
        series = run_series(run.pk, keys, window)
        return Response(
            {"cursor": cursor, "x": window.x, "keys": all_keys, "series": {k: s.as_dict() for k, s in series.items()}}
        )
