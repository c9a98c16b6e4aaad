"""What a run of an experiment (or N of them: a sweep's trials) will use, said before launch.

Two sources, each said for what it is:
- the experiment's settings bound the tokens: studio.experiments.layout.StepCost (the same numbers the edit page
  shows for one step) × the steps the settings train;
- its earlier runs (studio.runs.usage's recorded device-seconds and tokens) give the time and the tokens actually
  seen: a run's device-seconds per process are fitted as `load + per_step × steps` over the latest
  EARLIER_RUNS training runs that recorded usage (least squares; the mean rate per step when they all trained
  the same number of steps), and the tokens per step are the median of theirs, never above the settings' bound.
Without an earlier run there is no time, so no cost: the estimate says so rather than guess a device's speed.

`estimate(experiment, runs=n, overrides=...)` is what the experiment page shows and what a sweep calls for its
trials (overrides: a trial's settings, merged into the experiment's as a launch merges them).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from studio.experiments import forms, layout, specs
from studio.experiments.models import Experiment
from studio.runs import placement
from studio.runs.models import DEFAULT_TOTAL_STEPS, FINISHED_STATES, Run
from studio.runs.usage import Prices

EARLIER_RUNS = 10


@dataclass(frozen=True)
class Estimate:
    """What `runs` runs of these settings will use: each number is for all of them together."""

    runs: int
    steps: int  # per run
    processes: int  # per run
    max_tokens_generated: int | None  # the settings' bound (StepCost); None while a setting is not a number
    max_tokens_trained: int | None
    tokens_generated: int | None  # from earlier runs (None: none recorded tokens)
    tokens_trained: int | None
    device_seconds: float | None  # from earlier runs (None: no earlier run recorded its time)
    gpu_seconds: float | None
    cost: float | None  # at the operator's prices; None without a time or a price
    currency: str | None
    earlier_runs: int  # how many earlier runs it learned from

    @property
    def basis(self) -> str:
        """Where the numbers come from, in words."""
        if not self.earlier_runs:
            return "from the settings alone: no earlier run of this experiment recorded its usage, so no time or cost"
        plural = "s" if self.earlier_runs > 1 else ""
        return (
            f"time and tokens from {self.earlier_runs} earlier run{plural} of this experiment; bounds from its settings"
        )

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__} | {"basis": self.basis}


def estimate(experiment: Experiment, runs: int = 1, overrides: dict[str, Any] | None = None,
             prices: Prices | None = None) -> Estimate:  # fmt: skip
    """The estimate for `runs` runs of the experiment's settings with `overrides` merged in. Reads the experiment's
    settings (two to four queries) and its latest EARLIER_RUNS training runs with recorded usage (one)."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    prices = prices or Prices.from_settings()
    config = specs.deep_merge(experiment.spec_config(), overrides or {})
    steps = _int((config.get("optim") or {}).get("total_steps"), DEFAULT_TOTAL_STEPS)
    per_node, nodes = placement.processes(config)
    processes = per_node * nodes if placement.launcher(config) != placement.IN_PROCESS else 1
    bound = step_cost(config)
    history = _earlier(experiment)
    seconds = _seconds_per_process(history, steps)
    device = None if seconds is None else seconds * processes * runs
    gpu_share = _gpu_share(history)
    gpu = None if device is None else device * gpu_share
    generated = _per_step(history, "tokens_generated", bound.generated if bound else None)
    trained = _per_step(history, "tokens_trained", bound.trained if bound else None)
    cost = None if device is None or gpu is None else prices.cost(gpu, device)
    return Estimate(
        runs=runs, steps=steps, processes=processes,
        max_tokens_generated=bound.generated * steps * runs if bound else None,
        max_tokens_trained=bound.trained * steps * runs if bound else None,
        tokens_generated=None if generated is None else round(generated * steps * runs),
        tokens_trained=None if trained is None else round(trained * steps * runs),
        device_seconds=device, gpu_seconds=gpu, cost=cost, currency=prices.currency if cost is not None else None,
        earlier_runs=len(history),
    )  # fmt: skip


def step_cost(config: dict[str, Any]) -> layout.StepCost | None:
    """The settings' bounds of one step (studio.experiments.layout.StepCost, as the edit page computes them from
    its fields), or None while one of its inputs is not a whole number."""
    fields = [f for _, section in forms.experiment_sections(config, {}) for f in section]
    return layout.StepCost.of(fields, config.get("environment"))


@dataclass(frozen=True)
class _Past:
    steps: int
    per_process: float  # device-seconds per process
    device_seconds: float
    gpu_seconds: float
    tokens_generated: int
    tokens_trained: int


def _earlier(experiment: Experiment) -> list[_Past]:
    rows = (
        Run.objects.filter(experiment=experiment, kind="train", state__in=FINISHED_STATES, device_seconds__gt=0)
        .order_by("-created")
        .values_list("last_step", "resumed_at_step", "device_seconds", "gpu_seconds", "tokens_generated",
                     "tokens_trained", "usage")[:EARLIER_RUNS]
    )  # fmt: skip
    out = []
    for last, resumed_at, device, gpu, generated, trained, usage in rows:
        steps = last - (resumed_at or 0)
        attempts = (usage or {}).get("attempts") or {} if isinstance(usage, dict) else {}
        procs = max((len(a.get("processes") or []) for a in attempts.values()), default=1) or 1
        if steps > 0:
            out.append(_Past(steps, device / procs, device, gpu, generated, trained))
    return out


def _seconds_per_process(history: list[_Past], steps: int) -> float | None:
    """One process's device-seconds for a run of `steps`: load + per_step × steps fitted over `history`."""
    if not history:
        return None
    xs, ys = [p.steps for p in history], [p.per_process for p in history]
    if len(set(xs)) < 2:  # one step count: a rate per step, loading included
        return statistics.fmean(y / x for x, y in zip(xs, ys, strict=True)) * steps
    slope, load = statistics.linear_regression(xs, ys)
    if slope <= 0:  # noisy history (a run that loaded slowly): the plain rate is the safer guess
        return statistics.fmean(y / x for x, y in zip(xs, ys, strict=True)) * steps
    return max(0.0, load) + slope * steps


def _gpu_share(history: list[_Past]) -> float:
    device = sum(p.device_seconds for p in history)
    return sum(p.gpu_seconds for p in history) / device if device else 0.0


def _per_step(history: list[_Past], field: str, bound: int | None) -> float | None:
    seen = [getattr(p, field) / p.steps for p in history if getattr(p, field)]
    if not seen:
        return None
    median = statistics.median(seen)
    return min(median, bound) if bound is not None else median


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
