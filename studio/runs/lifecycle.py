"""State changes of a run: launch, cancel, resume, finish, and the sweeper for lost workers.

Every change is a conditional UPDATE (`state__in=...`) so two actors racing (a user
cancelling while the worker starts the run) cannot both win, followed by a status
event in the same transaction.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from studio.celery import EVAL_TASK, TRAIN_TASK
from studio.celery import app as celery_app
from studio.experiments import paths
from studio.experiments.specs import SpecError
from studio.runs import events, prompt_stats
from studio.runs.models import CANCELLED, FAILED, QUEUED, RUNNING, Run

ACTIVE = (QUEUED, RUNNING)


class RunActionError(ValueError):
    """An action that the run's state does not allow; the message says why."""


def create_run(team, spec: dict[str, Any], *, kind: str = "train", name: str = "", experiment=None, user=None,
               resumed_from: Run | None = None) -> Run:  # fmt: skip
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
    )
    events.record(run.pk, [events.status_item(QUEUED, "waiting for a worker")])
    transaction.on_commit(lambda: enqueue(run))
    return run


def _total_steps(kind: str, spec: dict[str, Any]) -> int:
    if kind == "eval":
        return 1
    return int(spec.get("optim", {}).get("total_steps", 0))


def enqueue(run: Run) -> None:
    """Send the run's task. A broker that cannot be reached fails the run with the reason
    (the row exists already; a run left queued with no message would wait forever)."""
    task = TRAIN_TASK if run.kind == "train" else EVAL_TASK
    try:
        result = celery_app.send_task(task, args=[run.pk])
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
    waiting = list(Run.objects.filter(state=QUEUED).order_by("pk"))
    for run in waiting:
        enqueue(run)
    return [run.pk for run in waiting]


def request_cancel(run: Run) -> Run:
    """A queued run is cancelled at once; a running one is asked to stop at its next check."""
    with transaction.atomic():
        if Run.objects.filter(pk=run.pk, state=QUEUED).update(state=CANCELLED, finished=timezone.now(),
                                                              cancel_requested=True):  # fmt: skip
            events.record(run.pk, [events.status_item(CANCELLED, "cancelled before it started")])
        elif Run.objects.filter(pk=run.pk, state=RUNNING, cancel_requested=False).update(cancel_requested=True):
            events.record(run.pk, [("log", run.last_step, {"line": "cancel requested; stopping at the next step"})])
        else:
            raise RunActionError(
                f"run is {Run.objects.get(pk=run.pk).state}; only queued or running runs can be cancelled"
            )
    run.refresh_from_db()
    return run


def resume(run: Run, user) -> Run:
    """A new run continuing from the run's latest checkpoint."""
    if run.kind != "train":
        raise RunActionError("only training runs can be resumed")
    if run.state in ACTIVE:
        raise RunActionError(f"run is {run.state}; cancel it or wait for it to end before resuming")
    checkpoint = run.checkpoints.order_by("-step").first()
    if checkpoint is None:
        raise RunActionError("run has no checkpoint to resume from")
    spec = copy.deepcopy(run.spec)
    spec.setdefault("checkpoint", {})["resume_from"] = checkpoint.path
    _check_paths(spec, run.team)
    name = f"{run.name} (resumed from step {checkpoint.step})"
    # One transaction: the task is sent on commit, so the worker never reports a prompt before the
    # statistics it continues from are copied.
    with transaction.atomic():
        new = create_run(run.team, spec, kind="train", name=name, experiment=run.experiment, user=user,
                         resumed_from=run)  # fmt: skip
        prompt_stats.inherit(new.pk, run.pk, checkpoint.step)
    return new


def evaluate_checkpoint(run: Run, user) -> Run:
    """An evaluation-only run (no training) of the run's latest checkpoint, with the run's settings."""
    checkpoint = run.checkpoints.order_by("-step").first()
    if checkpoint is None:
        raise RunActionError("run has no checkpoint to evaluate")
    spec = copy.deepcopy(run.spec)
    spec.setdefault("eval", {})["checkpoint"] = checkpoint.path
    spec.setdefault("checkpoint", {}).pop("resume_from", None)
    _check_paths(spec, run.team)
    name = f"{run.name} (eval of step {checkpoint.step})"
    return create_run(run.team, spec, kind="eval", name=name, experiment=run.experiment, user=user)


def _check_paths(spec: dict[str, Any], team) -> None:
    """The run's stored settings may predate the path rules (studio.experiments.paths): check again."""
    try:
        paths.check(spec, team)
    except SpecError as exc:
        raise RunActionError(f"the run's settings name paths this team may not read: {exc}") from None


def start(run_id: int, worker: str) -> bool:
    """Queued → running, claimed by `worker`. False if the run was cancelled (or taken) meanwhile."""
    now = timezone.now()
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, state=QUEUED).update(state=RUNNING, started=now, heartbeat=now,
                                                                  worker=worker):  # fmt: skip
            return False
        events.record(run_id, [events.status_item(RUNNING, f"started on {worker}")])
    return True


def finish(run_id: int, state: str, detail: str = "", error: str = "") -> bool:
    """Running → a final state, unless something else (the sweeper, a stop) ended it first."""
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, state=RUNNING).update(state=state, finished=timezone.now(), error=error):
            return False
        events.record(run_id, [events.status_item(state, detail or error)])
    return True


def beat(run_id: int) -> None:
    Run.objects.filter(pk=run_id, state=RUNNING).update(heartbeat=timezone.now())


def sweep_lost_runs(timeout_s: float | None = None) -> list[int]:
    """Fail running runs whose worker has been silent longer than HEARTBEAT_TIMEOUT_S."""
    timeout_s = settings.HEARTBEAT_TIMEOUT_S if timeout_s is None else timeout_s
    cutoff = timezone.now() - timedelta(seconds=timeout_s)
    lost = list(Run.objects.filter(state=RUNNING, heartbeat__lt=cutoff).values_list("pk", "worker"))
    failed = []
    for run_id, worker in lost:
        reason = f"worker lost: no heartbeat from {worker or 'its worker'} for over {timeout_s:.0f} s"
        if finish(run_id, FAILED, error=reason):
            failed.append(run_id)
    return failed


def fail_runs_of_worker(worker: str, reason: str) -> list[int]:
    ids = list(Run.objects.filter(state=RUNNING, worker=worker).values_list("pk", flat=True))
    return [run_id for run_id in ids if finish(run_id, FAILED, error=reason)]
