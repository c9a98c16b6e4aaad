"""A metric of several runs (seed repeats) as one band: at each step the mean over the runs, their sample std,
min, max and how many reported it (issue 41: a seed group's curves on the compare page, a mean line with a min-max
or +-std fill). One aggregate query over MetricPoint's (run, key, step) index; a long history is cut into at most
`points` buckets of whole steps, each holding what its steps' points hold together."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Avg, Count, F, Max, Min, StdDev

from studio.runs.downsample import DEFAULT_POINTS
from studio.runs.models import MetricPoint


def band(run_ids: Sequence[int], key: str, points: int = DEFAULT_POINTS) -> dict[str, list]:
    """{step, mean, std, min, max, n}: one list each, by step (a bucket's first step); std None under two values."""
    rows = MetricPoint.objects.filter(run_id__in=list(run_ids), key=key)
    span = rows.aggregate(first=Min("step"), last=Max("step"))
    out: dict[str, list] = {"step": [], "mean": [], "std": [], "min": [], "max": [], "n": []}
    if span["first"] is None:
        return out
    width = max(1, -(-(span["last"] - span["first"] + 1) // points))  # steps per bucket, so at most `points`
    buckets = (
        rows.annotate(bucket=(F("step") - span["first"]) / width)
        .values("bucket")
        .annotate(
            step=Min("step"),
            mean=Avg("value"),
            std=StdDev("value", sample=True),
            low=Min("value"),
            high=Max("value"),
            n=Count("run_id", distinct=True),
        )  # fmt: skip
        .order_by("bucket")
    )
    for row in buckets:
        out["step"].append(row["step"])
        out["mean"].append(row["mean"])
        out["std"].append(row["std"])
        out["min"].append(row["low"])
        out["max"].append(row["high"])
        out["n"].append(row["n"])
    return out
