"""workers.run_suite: one suite run (studio.evaluations) to its end, model by model.

For each model whose pairs are still queued: the first pair's run takes the GPU lease and starts
(workers.launch.claim, as an evaluation run does; a run whose GPU is busy sends the whole job back to
the queue, and the pairs already ended are skipped when it comes back), the model's other pairs start
beside it, each records its provenance as a run does (workers.provenance: its data snapshotted, which the task
then reads, so "Run again exactly" can repeat the pair), and the trainer's `evaluate_suite` runs every task on
the model once it is loaded. Each
pair reports to its own run (a DatabaseReporter: rollouts, eval/ metrics, log), its scores go to its
SuiteResult row, and the pairs end together when the model is done, the lead pair last (its end
releases the lease). A suite run on a training run's checkpoint also writes its scores as that run's
metric points `suite/<task>/...` at the checkpoint's step.
"""

from __future__ import annotations

import logging
import traceback

from celery import shared_task
from django.conf import settings
from django.db import transaction

from studio.evaluations.models import SuiteResult, SuiteRun
from studio.experiments import paths
from studio.runs import events, lifecycle, placement, reports
from studio.runs.models import CANCELLED, FAILED, QUEUED, SUCCEEDED
from trainers.report import failure_detail
from trainers.spec.suite import SuiteSpec
from workers import launch, provenance
from workers.reporting import CancelCheck, DatabaseReporter
from workers.tasks import _hostname, _start_heartbeat, run_spec

log = logging.getLogger(__name__)
SCORE_FIELDS = ("reward_mean", "pass_at_1", "pass_at_k")


@shared_task(name="workers.run_suite", bind=True, max_retries=None)
def run_suite(self, suite_run_id: int) -> str:
    try:
        return execute_suite(suite_run_id, _hostname(self))
    except launch.GpusBusy:
        raise self.retry(countdown=settings.GPU_WAIT_RETRY_S) from None


def execute_suite(suite_run_id: int, worker: str) -> str:
    """Run every still-queued pair of the suite run, model by model; "done", or "missing"."""
    suite_run = SuiteRun.objects.filter(pk=suite_run_id).select_related("source_run").first()
    if suite_run is None:
        log.warning("suite run %s does not exist (deleted, or another database)", suite_run_id)
        return "missing"
    spec = SuiteSpec.model_validate(suite_run.spec)
    for index, model in enumerate(spec.models):
        results = list(suite_run.results.filter(model_index=index, run__state=QUEUED).select_related("run"))
        if results:
            _run_model(suite_run, spec.model_copy(update={"models": [model]}), results, worker)
    return "done"


class _PairReporters:
    """trainers.run.suite.SuiteReporter over the pairs of one model: each pair's DatabaseReporter, its
    cancel check, the last state the trainer reported for it, and its scores written to its SuiteResult."""

    def __init__(self, suite_run: SuiteRun, results: list[SuiteResult]) -> None:
        self.suite_run = suite_run
        self.by_task = {r.task: r for r in results}
        self.reporters = {r.task: DatabaseReporter(r.run_id, attempt=r.run.restarts) for r in results}
        self.checks = {r.task: CancelCheck(r.run_id, attempt=r.run.restarts) for r in results}
        self.states: dict[str, tuple[str, str]] = {}
        self.current: str | None = None

    def cell(self, model: str, task: str):
        self.current = task
        reporter, states = self.reporters[task], self.states

        class Tracked:  # the pair's reporter, remembering the trainer's last status for the pair's end
            def __getattr__(self, name):
                return getattr(reporter, name)

            def status(self, state: str, detail: str = "") -> None:
                states[task] = (state, detail)
                reporter.status(state, detail)

        return Tracked()

    def scores(self, model: str, task: str, scores) -> None:
        values = {"num_prompts": scores.num_prompts, "k": scores.k}
        for name in SCORE_FIELDS:
            estimate = getattr(scores, name)
            values |= {name: estimate.value, f"{name}_low": estimate.low, f"{name}_high": estimate.high}
        SuiteResult.objects.filter(pk=self.by_task[task].pk).update(**values)
        if self.suite_run.source_run_id:  # a training run's suite: its curves at the checkpoint's step
            _add_curves(self.suite_run.source_run_id, self.suite_run.source_step or 0, scores.metrics(f"suite/{task}"))

    def log(self, line: str) -> None:
        for reporter in self.reporters.values():
            reporter.log(line)

    def should_stop(self) -> bool:
        return self.current is not None and self.checks[self.current]()


def _add_curves(run_id: int, step: int, values: dict[str, float]) -> None:
    """Metric points of a training run at a step it has passed, and their live event: written beside the
    training's own reports (not through a reporter of the run, whose flush would also set the run's progress,
    which the training moves on meanwhile)."""
    with transaction.atomic():
        events.record(run_id, [reports.write(run_id, "metrics", step, values)])


def _run_model(suite_run: SuiteRun, spec, results: list[SuiteResult], worker: str) -> None:
    from trainers.run.suite import evaluate_suite  # torch: only a worker that runs a suite imports it

    started, devices = _start_pairs(results, worker)
    if not started:
        return
    beats = [_start_heartbeat(r.run_id) for r in started]
    pairs = _PairReporters(suite_run, started)
    spec = spec.model_copy(update={"tasks": [t for t in spec.tasks if t.name in pairs.by_task]})
    try:
        for result in started:  # the path policy again, right before anything is read
            paths.refuse(paths.policy_errors(result.run.spec, suite_run.team))
        evaluate_suite(_pinned(spec, started, devices), pairs, pairs.should_stop)
        outcome = {
            task: pairs.states.get(task, ("failed", "the suite ended before this pair")) for task in pairs.by_task
        }
    except BaseException as exc:  # noqa: BLE001 - recorded on every pair of the model, as a run's failure is
        if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        log.exception("suite run %s failed", suite_run.pk)
        trace = traceback.format_exc()
        for reporter in pairs.reporters.values():
            reporter.log(trace)
        outcome = {task: ("failed", failure_detail(exc)) for task in pairs.by_task}
    finally:
        for beat in beats:
            beat.set()
    for result in reversed(started):  # the lead pair (first) last: its end releases the GPU lease
        _finish(result, pairs.reporters[result.task], *outcome[result.task])


def _pinned(spec: SuiteSpec, started: list[SuiteResult], devices: list[str]) -> SuiteSpec:
    """Record each started pair's provenance on its run (as workers.tasks does for a run) and return the suite
    (one model's) with each task reading what its pair's record pinned: the data and environment files as
    snapshotted, so the pair evaluates exactly the bytes its record digested."""
    pins = {r.task: provenance.record(r.run, run_spec(r.run), devices) for r in started}
    tasks = [t.model_copy(update={"data": pins[t.name].data, "environment": pins[t.name].environment})
             if t.name in pins else t for t in spec.tasks]  # fmt: skip
    return spec.model_copy(update={"tasks": tasks})


def _start_pairs(results: list[SuiteResult], worker: str) -> tuple[list[SuiteResult], list[str]]:
    """Claim the GPU lease with the first pair that is still queued, then start the rest beside it; the pairs
    started and the lease's devices."""
    for i, lead in enumerate(results):
        devices = launch.claim(lead.run, worker)  # GpusBusy: the job goes back to the queue
        if devices is None:  # cancelled (or taken) meanwhile
            continue
        where = placement.describe(lead.run.spec, "eval", devices)
        rest = [r for r in results[i + 1 :] if lifecycle.start(r.run_id, worker, where)]
        started = [lead, *rest]
        for result in started:
            result.run.refresh_from_db(fields=["restarts", "state"])
        return started, devices
    return [], []


def _finish(result: SuiteResult, reporter: DatabaseReporter, state: str, detail: str) -> None:
    final = {"succeeded": SUCCEEDED, "cancelled": CANCELLED}.get(state, FAILED)
    try:
        reporter.flush()
    except Exception:  # noqa: BLE001 - the database may be the problem; the run still ends below
        log.exception("could not flush the last reports of run %s", result.run_id)
    lifecycle.finish(result.run_id, final, detail=detail, error=detail if final == FAILED else "",
                     attempt=result.run.restarts)  # fmt: skip
