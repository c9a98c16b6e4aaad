"""State changes of a run: launch, cancel, resume, finish, and what happens when its worker goes.

Every change is a conditional UPDATE (`state__in=...`) so two actors racing (a user
cancelling while the worker starts the run) cannot both win, followed by a status
event in the same transaction.

A run whose infrastructure failed it (its worker lost: no heartbeat; or stopped: preemption, a
deploy, the studio stopped) is not failed for good: while its experiment's `checkpoint.max_restarts`
lasts, `restart` puts the same run back in the queue to resume from its newest checkpoint. The rows
it reported after that checkpoint (metric points, rollouts, prompt statistics) are removed, since the
resumed attempt reports those steps again: every step is stored once and the curves go on from the
checkpoint step. Each restart is a RunRestart row (when, why, from which step, steps done again), and
`Run.restarts` numbers the attempt, so a worker still running an attempt the studio gave up on
(a network partition, not a crash) stops at its next check and cannot end the new one.
"""

from __future__ import annotations

import copy
import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from studio.celery import EVAL_TASK, TRAIN_TASK
from studio.celery import app as celery_app
from studio.experiments import paths, specs
from studio.experiments.specs import SpecError, asynchrony_note
from studio.fleet import leases
from studio.lib.errors import Conflict
from studio.runs import events, placement, prompt_stats, provenance, scoring, signals
from studio.runs.models import (
    CANCELLED,
    FAILED,
    INTERRUPTED,
    QUEUED,
    RUNNING,
    STUDIO_SOURCE,
    WARNING_CHARS,
    Checkpoint,
    MetricPoint,
    Rollout,
    Run,
    RunRestart,
)
from trainers.run.checkpoint_folders import step_of
from trainers.spec.run import CheckpointSpec

ACTIVE = (QUEUED, RUNNING)
log = logging.getLogger(__name__)


class RunActionError(Conflict, ValueError):
    """An action that the run's state does not allow; the message says why (the API answers 409)."""


def _refuse_unless_allowed(run: Run, action: str) -> None:
    """RunActionError with the reason when Run.action_refusals (the one rule the pages offer actions by)
    says `action` cannot work on the run now."""
    if why := run.action_refusals()[action]:
        raise RunActionError(why)


def create_run(team, spec: dict[str, Any], *, kind: str = "train", name: str = "", experiment=None, user=None,
               resumed_from: Run | None = None, resumed_at_step: int | None = None) -> Run:  # fmt: skip
    """A queued run, enqueued once the transaction commits (so the worker finds the row)."""
    run = Run.objects.create(
        team=team,
        experiment=experiment,
        kind=kind,
        name=name or spec.get("name") or "run",
        spec=spec,
        created_by=user if user is not None and user.is_authenticated else None,
        total_steps=_total_steps(kind, spec),
        resumed_from=resumed_from,
        resumed_at_step=resumed_at_step,
        last_step=resumed_at_step or 0,  # a resumed run goes on from there: its progress starts there too
    )
    events.record(run.pk, [events.status_item(QUEUED, "waiting for a worker")])
    transaction.on_commit(lambda: enqueue(run))
    return run


def _total_steps(kind: str, spec: dict[str, Any]) -> int:
    if kind == "eval":
        return 1
    return int(spec.get("optim", {}).get("total_steps", 0))


def task_for(run: Run) -> str:
    """The worker task that runs `run` (its queue: studio.fleet.queues.task_queue)."""
    return TRAIN_TASK if run.kind == "train" else EVAL_TASK


def enqueue(run: Run) -> None:
    """Send the run's task. A broker that cannot be reached fails the run with the reason
    (the row exists already; a run left queued with no message would wait forever)."""
    try:
        result = celery_app.send_task(task_for(run), args=[run.pk])
    except Exception as exc:  # noqa: BLE001 - kombu's connection errors vary by transport
        error = f"could not reach the task broker to queue this run: {type(exc).__name__}: {exc}"
        with transaction.atomic():
            if Run.objects.filter(pk=run.pk, state=QUEUED).update(state=FAILED, finished=timezone.now(), error=error):
                events.record(run.pk, [events.status_item(FAILED, error)])
        run.state, run.error = FAILED, error
        return
    Run.objects.filter(pk=run.pk).update(celery_task_id=result.id)
    run.celery_task_id = result.id


def requeue_waiting() -> list[int]:
    """Send the tasks of every queued run again: an embedded Redis keeps nothing across a
    restart, so their messages are gone. A run whose message survived gets two; `start`
    lets only the first claim it, and the second finds it running and does nothing."""
    # No task runs an ingested run: its trainer reports to the ingest API.
    waiting = list(Run.objects.filter(state=QUEUED, source=STUDIO_SOURCE).order_by("pk"))
    for run in waiting:
        enqueue(run)
    return [run.pk for run in waiting]


def request_cancel(run: Run, checkpoint: bool = True) -> Run:
    """A queued run is cancelled at once; a running one is asked to stop at its next check (within a
    second, between two sampled tokens, for a run of one process: trainers.run.stopping), saving the last
    whole step's checkpoint unless `checkpoint` is False ("Stop now"). A run trained outside the studio
    (no worker of ours checks) ends at once: its trainer's next report is refused (studio.ingest), which
    tells it to stop."""
    with transaction.atomic():
        if Run.objects.filter(pk=run.pk, state=QUEUED).update(state=CANCELLED, finished=timezone.now(),
                                                              cancel_requested=True, waiting_for=""):  # fmt: skip
            events.record(run.pk, [events.status_item(CANCELLED, "cancelled before it started")])
        elif (
            Run.objects.filter(pk=run.pk, state=RUNNING)
            .exclude(source=STUDIO_SOURCE)
            .update(state=CANCELLED, finished=timezone.now(), cancel_requested=True)
        ):
            events.record(
                run.pk, [events.status_item(CANCELLED, "stopped in the studio: its trainer is told at its next report")]
            )
        elif Run.objects.filter(pk=run.pk, state=RUNNING, cancel_requested=False).update(
            cancel_requested=True, stop_saves_checkpoint=checkpoint
        ):
            events.record(run.pk, [("log", run.last_step, {"line": stop_line(run, checkpoint)})])
        else:
            raise RunActionError(Run.objects.get(pk=run.pk).action_refusals()["cancel"] or "run cannot be cancelled")
    run.refresh_from_db()
    return run


def stop_line(run: Run, checkpoint: bool) -> str:
    """What the run's log says when a stop is asked for: when it stops and what it keeps."""
    if run.kind != "train":
        return "stop asked for: it stops after this batch"
    asynchronous = bool(((run.spec.get("rollout") or {}).get("asynchronous") or {}).get("runs_ahead"))
    alone = placement.launcher(run.spec, run.kind) == placement.IN_PROCESS and not asynchronous
    when = "now, between two sampled tokens" if alone else "at the end of this step"
    if not checkpoint:
        return f"stop now asked for: it stops {when}, without saving a checkpoint"
    return f"stop asked for: it stops {when}, saving the last whole step's checkpoint"


def resume(run: Run, user) -> Run:
    """A new run continuing from the run's latest checkpoint."""
    _refuse_unless_allowed(run, "resume")
    path, step = resume_point(run)
    if path is None:
        raise RunActionError("run has no checkpoint to resume from")
    spec = copy.deepcopy(run.spec)
    spec.setdefault("checkpoint", {})["resume_from"] = path
    _check_paths(spec, run.team)
    _check_placement(spec, "train")
    name = f"{run.name} (resumed from step {step})"
    # One transaction: the task is sent on commit, so the worker never reports a prompt before the
    # statistics it continues from are copied.
    with transaction.atomic():
        new = create_run(run.team, spec, kind="train", name=name, experiment=run.experiment, user=user,
                         resumed_from=run, resumed_at_step=step)  # fmt: skip
        prompt_stats.inherit(new.pk, run.pk, step)
    return new


def resume_point(run: Run) -> tuple[str | None, int]:
    """(checkpoint folder, its step) a run goes on from: its newest checkpoint; else, for a run that
    itself resumed from one (and was stopped before writing its own), that one; else (None, 0)."""
    checkpoint = run.checkpoints.order_by("-step").first()
    if checkpoint is not None:
        return checkpoint.path, checkpoint.step
    started_from = (run.spec.get("checkpoint") or {}).get("resume_from")
    if not started_from or started_from == "latest":
        return None, 0
    known = Checkpoint.objects.filter(path=started_from, run__team=run.team).order_by("-step").first()
    return started_from, known.step if known else _step_of_folder(started_from)


def _step_of_folder(path: str) -> int:
    """The step a checkpoint folder is named for (trainers.run.checkpoint writes `step-N`); 0 if not."""
    return step_of(path.rstrip("/").rsplit("/", 1)[-1]) or 0


def evaluate_checkpoint(run: Run, user, dataset=None) -> Run:
    """An evaluation-only run (no training) of the run's latest checkpoint, with the run's settings: on the
    run's own prompts, or on `dataset` (a held-out Dataset of the run's team, its rows mapped as that dataset
    says, the run's prompt options kept). The caller checked the dataset is the team's."""
    _refuse_unless_allowed(run, "evaluate")
    checkpoint = run.checkpoints.order_by("-step").first()
    if checkpoint is None:
        raise RunActionError("run has no checkpoint to evaluate")
    spec = copy.deepcopy(run.spec)
    spec.setdefault("eval", {})["checkpoint"] = checkpoint.path
    spec.setdefault("checkpoint", {}).pop("resume_from", None)
    if dataset is not None:
        if problem := dataset.launch_problem():
            raise SpecError({"dataset": problem})
        options = {k: v for k, v in (spec.get("data") or {}).items() if k not in ("procedural", "limit", "path")}
        spec["data"] = {**options, **dataset.data_spec()}
        spec = specs.validate(spec)  # SpecError naming the field: the run's settings may not fit the dataset
    _check_paths(spec, run.team)
    _check_placement(spec, "eval")
    name = f"{run.name} (eval of step {checkpoint.step}" + (f" on {dataset.name})" if dataset is not None else ")")
    return create_run(run.team, spec, kind="eval", name=name, experiment=run.experiment, user=user)


def clone(run: Run, user, *, name: str = "", overrides: dict[str, Any] | None = None) -> Run:
    """A new run with the run's settings and `overrides` (change one thing), in its experiment, from the
    start. SpecError naming each bad field when the settings with the overrides are refused."""
    _refuse_unless_allowed(run, "clone")
    config = specs.deep_merge(run.spec, overrides or {})
    config.get("checkpoint", {}).pop("resume_from", None)
    spec = paths.validate_for_team(config, run.team)
    return create_run(run.team, spec, kind=run.kind, experiment=run.experiment, name=name or f"{run.name} (clone)",
                      user=user)  # fmt: skip


def rerun_exactly(run: Run, user) -> tuple[Run, list[str]]:
    """Run again exactly: a new run of the same pinned inputs (the spec as the run's first attempt got it,
    the data as the worker snapshotted it; the rubric and environment definitions travel inside the spec),
    noted as repeating the run; and what differs now (studio.runs.provenance.changed_since: data files,
    rows, code and packages as the studio sees them). Its worker records its own provenance, and its page
    compares the two records (device, packages, commit)."""
    _refuse_unless_allowed(run, "rerun")
    try:
        spec, notes = provenance.pinned_spec(run)
    except ValueError as exc:
        raise RunActionError(str(exc)) from None
    _check_paths(spec, run.team)
    _check_placement(spec, run.kind)
    notes += provenance.changed_since(run)
    if note := asynchrony_note(spec):
        notes.append(note)
    with transaction.atomic():
        new = create_run(run.team, spec, kind=run.kind, name=f"{run.name} (again exactly)", experiment=run.experiment,
                         user=user)  # fmt: skip
        Run.objects.filter(pk=new.pk).update(repeat_of=run)
        new.repeat_of = run
        lines = [f"runs run #{run.pk} again exactly: its settings and data as it read them"]
        lines += [f"differs now: {note}" for note in notes]
        events.record(new.pk, [("log", 0, {"line": line}) for line in lines])
    return new, notes


def lineage(run: Run, limit: int = 20) -> list[dict[str, Any]]:
    """The runs a resumed run continues, oldest first, each with the steps of it that the run goes on from:
    for C resumed from B at step t, B from A at step s: [A up to s, B from s + 1 up to t]. The run page draws
    their curves before its own. Stops at a run that was deleted, or after `limit` runs (a query each)."""
    chain: list[dict[str, Any]] = []
    child = run
    seen = {run.pk}
    while child.resumed_from_id and child.resumed_from_id not in seen and len(chain) < limit:
        parent = Run.objects.filter(pk=child.resumed_from_id).first()
        if parent is None:
            break
        seen.add(parent.pk)
        chain.append({"id": parent.pk, "name": parent.name, "step_max": resumed_at(child), "step_min": None})
        child = parent
    chain.reverse()
    for before, after in zip(chain, chain[1:], strict=False):
        after["step_min"] = before["step_max"] + 1
    return chain


def resumed_at(run: Run) -> int:
    """The step of its source's checkpoint a resumed run went on from: as lifecycle.resume noted it, or, for
    a run resumed before that was noted, its settings' checkpoint folder (an automatic restart may have
    replaced that folder by one of the run's own since: then, one before its first own step)."""
    if run.resumed_at_step is not None:
        return run.resumed_at_step
    folder = (run.spec.get("checkpoint") or {}).get("resume_from") or ""
    known = Checkpoint.objects.filter(path=folder, run_id=run.resumed_from_id).values_list("step", flat=True).first()
    if known is not None:
        return known
    first = MetricPoint.objects.filter(run=run).order_by("step").values_list("step", flat=True).first()
    return max(0, first - 1) if first is not None else _step_of_folder(folder)


def _check_paths(spec: dict[str, Any], team) -> None:
    """The run's stored settings may predate the path rules (studio.experiments.paths): check again."""
    try:
        paths.check(spec, team)
    except SpecError as exc:
        raise RunActionError(f"the run's settings name paths this team may not read: {exc}") from None


def _check_placement(spec: dict[str, Any], kind: str) -> None:
    if refused := placement.refusal(spec, kind):
        raise RunActionError(refused)


def restart(run_id: int, reason: str) -> bool:
    """Put a run that its infrastructure stopped (lost or interrupted) back in the queue, to resume
    from its newest checkpoint, while its automatic restarts last. False (and nothing changed) when
    it may not: a cancel was asked for, it is not a finished train or eval run, none are left."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, state__in=(FAILED, INTERRUPTED)).first()
        if run is None or run.cancel_requested or run.is_external:  # an ingested run has no task to queue again
            return False
        allowed = max_restarts(run.spec)
        if run.restarts >= allowed:
            if allowed:
                events.record(run_id, [("log", run.last_step, {"line": f"no automatic restart left ({allowed} used)"})])
            return False
        path, step = resume_point(run) if run.kind == "train" else (None, 0)
        spec = copy.deepcopy(run.spec)
        if path is not None:
            spec.setdefault("checkpoint", {})["resume_from"] = path
        lost = max(0, run.last_step - step)
        number = run.restarts + 1
        RunRestart.objects.create(run=run, number=number, reason=reason, from_step=step, checkpoint=path or "",
                                  steps_lost=lost)  # fmt: skip
        _rewind(run_id, step)
        where = f"the step-{step} checkpoint" if path else "the start"
        detail = f"restart {number} of {allowed} ({reason}): resuming from {where}"
        if lost:
            detail += f"; steps {step + 1}-{run.last_step} are done again"
        updated = Run.objects.filter(pk=run_id, state=run.state).update(
            state=QUEUED, spec=spec, restarts=number, last_step=step, started=None, finished=None, heartbeat=None,
            error="", worker="", placement="", waiting_for="", interrupt_requested=False,
        )  # fmt: skip
        if not updated:
            return False
        events.record(run_id, [events.status_item(QUEUED, detail, restarted_from_step=step, restarts=number)])
        run.state = QUEUED
        transaction.on_commit(lambda: enqueue(run))
    return True


def max_restarts(spec: dict[str, Any]) -> int:
    """The run's automatic restarts: its setting, or the default for a run saved before there was one."""
    setting = (spec.get("checkpoint") or {}).get("max_restarts")
    return int(CheckpointSpec.model_fields["max_restarts"].default if setting is None else setting)


def _rewind(run_id: int, step: int) -> None:
    """Remove what the run reported after `step`: the resumed attempt reports those steps again."""
    MetricPoint.objects.filter(run_id=run_id, step__gt=step).delete()
    Rollout.objects.filter(run_id=run_id, step__gt=step).delete()  # their RolloutScore rows go with them
    Checkpoint.objects.filter(run_id=run_id, step__gt=step).delete()
    prompt_stats.rewind(run_id, step)


def start(run_id: int, worker: str, where: str = "") -> bool:
    """Queued → running, claimed by `worker` (`where`: its processes and GPUs, studio.runs.placement.describe).
    False if the run was cancelled (or taken) meanwhile."""
    now = timezone.now()
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, state=QUEUED).update(state=RUNNING, started=now, heartbeat=now,
                                                                  worker=worker, placement=where, waiting_for=""):  # fmt: skip
            return False
        detail = f"started on {worker}" + (f": {where}" if where else "")
        events.record(run_id, [events.status_item(RUNNING, detail, placement=where)])
    return True


def note_waiting(run_id: int, reason: str) -> bool:
    """Say what a queued run waits for (free GPUs): on the run, and as a status event when it changed
    (a run retried every few seconds logs its reason once, not at every try). False: not queued, or no change."""
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, state=QUEUED).exclude(waiting_for=reason).update(waiting_for=reason):
            return False
        events.record(run_id, [events.status_item(QUEUED, reason)])
    return True


def finish(run_id: int, state: str, detail: str = "", error: str = "", attempt: int | None = None) -> bool:
    """Running → a final state, unless something else (the sweeper, a stop) ended it first; `attempt`
    (Run.restarts when the worker claimed it): only if no restart has begun a newer attempt since.
    The run's GPU leases end with it, whoever ends it (its worker, or the sweeper for a lost worker)."""
    running = Run.objects.filter(pk=run_id, state=RUNNING)
    if attempt is not None:
        running = running.filter(restarts=attempt)
    tally, failed, warning = _scoring_verdict(run_id, running)
    with transaction.atomic():
        ended = dict(state=state, finished=timezone.now(), error=error, interrupt_requested=False, scoring=tally)
        if failed:  # the warning said "step 1" when the streak began: now it says the whole run
            ended["warning"] = warning
        if not running.update(**ended):
            return False
        leases.release(run_id)
        items = [events.status_item(state, detail or error, **({"scoring_failed": failed} if failed else {}))]
        if failed:
            items.insert(0, ("warning", None, {"message": ended["warning"]}))
        events.record(run_id, items)
        transaction.on_commit(lambda: signals.run_finished.send(None, run_id=run_id, state=state), robust=True)
    return True


def _scoring_verdict(run_id: int, running) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """(its criterion errors over the whole run, Run.scoring_failed of them, the warning that says so) for
    a run that ends (studio.runs.scoring): read before the write, which holds the lock. A run ends all the
    same when they cannot be read (nothing tallied, nothing said)."""
    try:
        spec = running.values_list("spec", flat=True).first()
        tally = scoring.tally(run_id, scoring.criteria(spec)) if spec is not None else {}
        failed = Run(scoring=tally).scoring_failed
        return tally, failed, scoring.describe(run_id, failed)[:WARNING_CHARS] if failed else ""
    except Exception:  # noqa: BLE001 - a diagnosis; the run must end whatever happens to it
        log.exception("run %s: could not tally its criterion errors", run_id)
        return {}, [], ""


def beat(run_id: int) -> None:
    Run.objects.filter(pk=run_id, state=RUNNING).update(heartbeat=timezone.now())


def sweep_lost_runs(timeout_s: float | None = None) -> list[int]:
    """End running runs whose worker has been silent longer than HEARTBEAT_TIMEOUT_S: failed, and
    restarted from their newest checkpoint while their automatic restarts last."""
    timeout_s = settings.HEARTBEAT_TIMEOUT_S if timeout_s is None else timeout_s
    cutoff = timezone.now() - timedelta(seconds=timeout_s)
    # Only the studio's own: an ingested run's trainer reports when it likes and ends it itself (studio.ingest).
    lost = list(
        Run.objects.filter(state=RUNNING, heartbeat__lt=cutoff, source=STUDIO_SOURCE).values_list("pk", "worker")
    )
    return [
        run_id for run_id, worker in lost
        if end_lost(run_id, f"worker lost: no heartbeat from {worker or 'its worker'} for over {timeout_s:.0f} s")
    ]  # fmt: skip


def end_lost(run_id: int, reason: str, attempt: int | None = None) -> bool:
    """A running run whose process died (no heartbeat, or its pool process was killed): failed with
    `reason`, then restarted while it may be."""
    with transaction.atomic():
        if not finish(run_id, FAILED, error=reason, attempt=attempt):
            return False
        restart(run_id, reason)
    return True


def interrupt(run_id: int, detail: str, attempt: int | None = None) -> bool:
    """A running run stopped by its infrastructure (a worker shutting down): interrupted, not failed,
    and restarted while it may be (it checkpointed on the way down when it could)."""
    with transaction.atomic():
        if not finish(run_id, INTERRUPTED, detail=detail, attempt=attempt):
            return False
        restart(run_id, detail)
    return True


def interrupt_runs_of_worker(worker: str, reason: str) -> list[int]:
    """Every run `worker` still runs, interrupted (a worker stopped before they could end themselves)."""
    ids = list(Run.objects.filter(state=RUNNING, worker=worker).values_list("pk", flat=True))
    return [run_id for run_id in ids if interrupt(run_id, reason)]


def request_interrupt(worker: str) -> list[int]:
    """Ask the runs of a worker that is shutting down to checkpoint at their next step and stop
    (workers.reporting.CancelCheck reads the flag); returns their ids."""
    running = Run.objects.filter(state=RUNNING, worker=worker, interrupt_requested=False)
    runs = list(running.values_list("pk", "last_step"))
    Run.objects.filter(pk__in=[run_id for run_id, _ in runs]).update(interrupt_requested=True)
    line = f"{worker} is shutting down: the run saves a checkpoint at the end of this step and stops"
    for run_id, step in runs:
        events.record(run_id, [("log", step, {"line": line})])
    return [run_id for run_id, _ in runs]
