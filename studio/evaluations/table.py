"""A suite run's result table, models x tasks, as the result page and the API show it: each cell's mean
reward, pass@1 and pass@k with their intervals, its change against the base model, whether it is the
best of its task, its state, and where its samples are (the pair's run in the inspector)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from studio.evaluations.models import SuiteResult, SuiteRun
from studio.runs.models import SUCCEEDED, MetricPoint

METRICS = ("reward_mean", "pass_at_1", "pass_at_k")
# The metric that picks a task's best model: the one people compare first.
BEST_BY = "pass_at_1"


def result_table(suite_run: SuiteRun) -> dict[str, Any]:
    """{models: [{index, label, checkpoint, step, base, run}], tasks: [{index, name, k}], base: label or None,
    rows: [{model, cells: [cell per task]} per model]}. A cell: {task, model, state, run, inspector, num_prompts, k,
    <metric>: {value, low, high, delta} for each of METRICS (null until scored), best}. `delta` is the
    change against the first base model on that task (null for it, and when there is none)."""
    results = list(suite_run.results.select_related("run").order_by("model_index", "task_index"))
    _scores_from_metrics([r for r in results if r.reward_mean is None and r.run.state == SUCCEEDED])
    models: dict[int, dict[str, Any]] = {}
    tasks: dict[int, dict[str, Any]] = {}
    for r in results:
        models.setdefault(r.model_index, {"index": r.model_index, "label": r.model_label, "checkpoint": r.checkpoint,
                                          "step": r.step, "base": r.is_base, "run": r.source_run_id})  # fmt: skip
        tasks.setdefault(r.task_index, {"index": r.task_index, "name": r.task, "k": r.k})
    base = next((m["index"] for m in models.values() if m["base"]), None)
    by_pair = {(r.model_index, r.task_index): r for r in results}
    best = {t: _best(by_pair, models, t) for t in tasks}
    rows = [
        {"model": models[m], "cells": [
            _cell(by_pair[(m, t)], by_pair.get((base, t)) if base is not None and base != m else None, best[t] == m)
            for t in sorted(tasks) if (m, t) in by_pair]}
        for m in sorted(models)
    ]  # fmt: skip
    return {
        "models": [models[m] for m in sorted(models)],
        "tasks": [tasks[t] for t in sorted(tasks)],
        "base": models[base]["label"] if base is not None else None,
        "rows": rows,
    }


def _cell(r: SuiteResult, base: SuiteResult | None, best: bool) -> dict[str, Any]:
    cell = {"task": r.task, "model": r.model_label, "state": r.run.state, "run": r.run_id,
            "inspector": reverse("run-detail", args=[r.run_id]) + "#rollouts", "num_prompts": r.num_prompts, "k": r.k,
            "best": best}  # fmt: skip
    for name in METRICS:
        value = getattr(r, name)
        if value is None:
            cell[name] = None
            continue
        base_value = getattr(base, name) if base is not None else None
        delta = value - base_value if base_value is not None else None
        cell[name] = {"value": value, "low": getattr(r, f"{name}_low"), "high": getattr(r, f"{name}_high"),
                      "delta": delta, "delta_text": f"{delta:+.3f}" if delta is not None else ""}  # fmt: skip
    return cell


def _best(by_pair: dict[tuple[int, int], SuiteResult], models: dict[int, dict], task: int) -> int | None:
    """The model with the highest BEST_BY on the task (ties: the higher mean reward, then the earlier model)."""
    scored = [
        (r.pass_at_1, r.reward_mean, -m) for m in models if (r := by_pair.get((m, task))) and r.pass_at_1 is not None
    ]
    return -max(scored)[2] if scored else None


def _scores_from_metrics(results: list[SuiteResult]) -> None:
    """Scores of pairs whose run ended without the suite's job writing them (after a broker restart the studio
    sends a queued pair's run again as an evaluation of its own, which reports the same eval/ metrics), read from
    their runs' metric points into the rows in memory. One query for them all."""
    if not results:
        return
    by_run = {r.run_id: r for r in results}
    for point in MetricPoint.objects.filter(run_id__in=by_run, step=0, key__startswith="eval/"):
        r = by_run[point.run_id]
        name = point.key.removeprefix("eval/").replace(f"pass@{r.k}", "pass_at_k").replace("pass@1", "pass_at_1")
        if name.removesuffix("_low").removesuffix("_high") in METRICS:
            setattr(r, name, point.value)
