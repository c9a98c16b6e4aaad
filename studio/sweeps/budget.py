"""What a sweep may still spend: trials, and GPU-hours summed over its trials' runs (Run.gpu_seconds, which
their workers record as they go: studio.runs.usage). Places at once are the driver's to count."""

from __future__ import annotations

import math

from django.db.models import Sum

from studio.sweeps import space
from studio.sweeps.models import GRID, Sweep


def trial_limit(sweep: Sweep) -> int:
    """The trials the sweep runs at most: its budget, or fewer when its grid holds fewer combinations."""
    if sweep.sampler == GRID:
        return min(sweep.max_trials, math.prod(len(values) for values in space.grid(sweep.parameters).values()))
    return sweep.max_trials


def gpu_hours_used(sweep: Sweep) -> float:
    """GPU-hours its trials' runs have used so far (a running one's as of its last report)."""
    seconds = sweep.trials.aggregate(total=Sum("run__gpu_seconds"))["total"] or 0.0
    return seconds / 3600


def exhausted(sweep: Sweep) -> str:
    """Why the sweep launches no more trials, in words; "" while it may."""
    limit = trial_limit(sweep)
    if sweep.trials.count() >= limit:
        every = "its grid's" if limit < sweep.max_trials else "its"
        return f"{every} {limit} trial{'s' if limit != 1 else ''} run"
    if sweep.max_gpu_hours is not None and (used := gpu_hours_used(sweep)) >= sweep.max_gpu_hours:
        return f"its GPU-hours budget is spent ({used:.2f} of {sweep.max_gpu_hours:g})"
    return ""
