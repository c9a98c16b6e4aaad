"""An evaluation suite: every task on every model, batched per model (a model is loaded and its engine made
once, then every task runs on it), each (model, task) pair sampled from the same seed with the same engine
kind, so the models are compared on the same draws.

Each pair is one evaluation run (`SuiteSpec.cell_spec`) and reports as one: its rollouts, `eval/` metrics
and status go to the pair's own Reporter (`SuiteReporter.cell`), and its scores with their bootstrap
intervals (`trainers.run.suite_stats`) to `SuiteReporter.scores`. A model that cannot be loaded, or a task
that fails on it, fails those pairs only; the suite goes on with the rest.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from trainers.data.prompts import load_prompts
from trainers.models.loading import default_device, load_policy
from trainers.report import MemoryReporter, Reporter, failure_detail
from trainers.rewards.rubric import Rubric
from trainers.rollout.engines.catalog import create_engine
from trainers.run.checkpoint import random_state_kept
from trainers.run.evaluate import sample_prompts, sampled_metrics
from trainers.run.seeding import seed_everything
from trainers.run.suite_stats import CellScores, cell_scores
from trainers.spec import RunSpec
from trainers.spec.suite import SuiteModelSpec, SuiteSpec, SuiteTaskSpec


class SuiteReporter(Protocol):
    """Where a suite reports: one Reporter per (model label, task name) pair for its rollouts, metrics and
    status, the pair's scores once it is done, and the suite's own log lines."""

    def cell(self, model: str, task: str) -> Reporter: ...
    def scores(self, model: str, task: str, scores: CellScores) -> None: ...
    def log(self, line: str) -> None: ...


@dataclass
class SuiteResult:
    status: str  # "succeeded" | "cancelled" | "failed" (some pair failed; the others were still scored)
    scores: dict[tuple[str, str], CellScores] = field(default_factory=dict)  # (model label, task name) -> scores
    failures: dict[tuple[str, str], str] = field(default_factory=dict)  # (model label, task name) -> why


def evaluate_suite(
    spec: SuiteSpec, reporter: SuiteReporter, should_stop: Callable[[], bool] = lambda: False
) -> SuiteResult:
    """Score every task of `spec` on every model, model by model; `should_stop()` is checked between batches
    of prompts. Pairs not reached when it stops are reported cancelled."""
    result = SuiteResult("succeeded")
    for model in spec.models:
        if should_stop():
            result.status = "cancelled"
        if result.status == "cancelled":
            for task in spec.tasks:
                reporter.cell(model.label, task.name).status("cancelled", "the suite was stopped first")
            continue
        _evaluate_model(spec, model, reporter, should_stop, result)
    if result.failures and result.status != "cancelled":
        result.status = "failed"
    return result


def _evaluate_model(
    spec: SuiteSpec, model: SuiteModelSpec, reporter: SuiteReporter, should_stop: Callable[[], bool],
    result: SuiteResult,
) -> None:  # fmt: skip
    """Load `model` once and run every task on it, each pair's outcome recorded in `result`."""
    cells = {task.name: spec.cell_spec(model, task) for task in spec.tasks}
    engine = None
    try:
        t0 = time.perf_counter()
        try:
            seed_everything(spec.seed)
            policy, tokenizer = load_policy(model.model, default_device(), checkpoint=model.checkpoint)
            policy.eval()
            engine = create_engine(_engine_spec(cells), model=policy, tokenizer=tokenizer)
        except Exception as exc:
            line = traceback.format_exc()
            for task in spec.tasks:
                _fail(reporter, result, model, task, exc, line)
            return
        reporter.log(f"{model.label}: loaded in {time.perf_counter() - t0:.1f}s")
        for task in spec.tasks:
            if result.status == "cancelled":
                reporter.cell(model.label, task.name).status("cancelled", "the suite was stopped first")
                continue
            try:
                _evaluate_cell(spec, cells[task.name], engine, tokenizer, model, task, reporter, should_stop, result)
            except Exception as exc:
                _fail(reporter, result, model, task, exc, traceback.format_exc())
    finally:
        # The next model needs the memory (a vLLM engine lives in the worker process).
        if engine is not None:
            engine.close()


def _evaluate_cell(
    spec: SuiteSpec, cell: RunSpec, engine, tokenizer, model: SuiteModelSpec, task: SuiteTaskSpec,
    reporter: SuiteReporter, should_stop: Callable[[], bool], result: SuiteResult,
) -> None:  # fmt: skip
    out = reporter.cell(model.label, task.name)
    out.status("running", f"evaluating {model.label} on {task.name}")
    rubric = Rubric.from_spec(cell.rubric)
    try:
        prompts = load_prompts(cell.data, tokenizer)[: cell.eval.num_prompts]
        # Every pair starts from the same random state, whatever ran on the engine before it.
        with random_state_kept(engine, spec.seed):
            samples = sample_prompts(cell, engine, rubric, tokenizer, prompts, out, should_stop)
    finally:
        rubric.close()
    if samples.stopped:
        result.status = "cancelled"
    if not samples.rewards:
        out.status("cancelled", "stopped before any prompt was evaluated")
        return
    passed = [[bool(verdict) for verdict in v] for v in samples.verdicts]  # the pair's rubric has a threshold
    k = task.samples_per_prompt
    scores = cell_scores(samples.rewards, passed, resamples=spec.bootstrap_resamples, confidence=spec.confidence,
                         seed=spec.seed)  # fmt: skip
    out.metrics(0, sampled_metrics("eval", samples.rewards, samples.criteria, k, passed) | scores.metrics("eval"))
    reporter.scores(model.label, task.name, scores)
    result.scores[(model.label, task.name)] = scores
    state = "cancelled" if samples.stopped else "succeeded"
    out.status(state, f"{scores.num_prompts} prompts x {k} samples")


def _engine_spec(cells: dict[str, RunSpec]) -> RunSpec:
    """The pair whose settings make the engine: the one with the longest context (a vLLM engine's
    max_model_len is fixed when it starts), so every task's prompts and completions fit."""

    def context(spec: RunSpec) -> int:
        after = spec.environment.max_episode_tokens if spec.environment else spec.rollout.max_new_tokens
        return spec.data.max_prompt_tokens + after

    return max(cells.values(), key=context)


def _fail(
    reporter: SuiteReporter, result: SuiteResult, model: SuiteModelSpec, task: SuiteTaskSpec, exc: Exception,
    trace: str,
) -> None:  # fmt: skip
    out = reporter.cell(model.label, task.name)
    out.log(trace)
    out.status("failed", failure_detail(exc))
    result.failures[(model.label, task.name)] = failure_detail(exc)


class MemorySuiteReporter:
    """Keeps each pair's reports in a MemoryReporter; for tests and notebooks."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], MemoryReporter] = {}
        self.cell_scores: dict[tuple[str, str], CellScores] = {}
        self.lines: list[str] = []

    def cell(self, model: str, task: str) -> MemoryReporter:
        return self.cells.setdefault((model, task), MemoryReporter())

    def scores(self, model: str, task: str, scores: CellScores) -> None:
        self.cell_scores[(model, task)] = scores

    def log(self, line: str) -> None:
        self.lines.append(line)
