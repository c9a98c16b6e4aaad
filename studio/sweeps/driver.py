"""A sweep's driver: tell Optuna what its trials' runs reported, prune through the normal stop path, and
launch the next trials while the budget lasts.

`drive(sweep_id)` does one pass (a new sweep's first makes its study). It runs where something happened: after a run's metric points are
written (its validation reported: studio.runs.signals.metrics_written), after a run ends (run_finished),
at the studio's start (launcher.studio.send_again) and at every worker heartbeat (workers.gpu.beat), so a
sweep resumes after a restart from what the database holds: its rows and Optuna's study. One driver at a
time holds a sweep (`claimed`, a lease); one that finds it held asks the holder to pass once more.

A trial's intermediate values are the points of the sweep's objective at steps after 0 (the step-0
validation is of the untrained model: the same for every trial, it says nothing of the settings).
"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from studio.experiments import services
from studio.runs import events, lifecycle
from studio.runs.models import CANCELLED, FAILED, RUNNING, SUCCEEDED, MetricPoint, Run
from studio.sweeps import budget, search, space
from studio.sweeps.models import (
    ACTIVE,
    BEST,
    FINISHED,
    MAXIMIZE,
    NO_PRUNING,
    T_COMPLETE,
    T_FAILED,
    T_PRUNED,
    T_RUNNING,
    Sweep,
    Trial,
)

LEASE_S = 120  # a driver that died holding a sweep lets it go after this long
MAX_PASSES = 5  # passes one call makes while other events ask for another
log = logging.getLogger(__name__)


def claimed(sweep_id: int) -> bool:
    """Take the sweep's lease (a conditional UPDATE, committed at once), or, when another driver holds it,
    ask that one to pass again (drive_again) and answer False."""
    now = timezone.now()
    free = Q(driving_until__isnull=True) | Q(driving_until__lt=now)
    with transaction.atomic():
        if Sweep.objects.filter(free, pk=sweep_id).update(driving_until=now + timedelta(seconds=LEASE_S),
                                                          drive_again=False):  # fmt: skip
            return True
        Sweep.objects.filter(pk=sweep_id).update(drive_again=True)
    return False


def release(sweep_id: int) -> bool:
    """Let the lease go; True when another event asked for a pass meanwhile (the lease is then kept)."""
    with transaction.atomic():
        if Sweep.objects.filter(pk=sweep_id, drive_again=True).update(drive_again=False):
            return True
        Sweep.objects.filter(pk=sweep_id).update(driving_until=None)
    return False


def drive(sweep_id: int) -> bool:
    """One pass (more while events ask for them) over the sweep, unless another driver holds it."""
    if not claimed(sweep_id):
        return False
    try:
        for _ in range(MAX_PASSES):
            sweep = Sweep.objects.select_related("experiment", "team", "created_by").get(pk=sweep_id)
            step(sweep)
            if not release(sweep_id):
                break
        else:  # events keep asking: the next one drives again
            Sweep.objects.filter(pk=sweep_id).update(driving_until=None, drive_again=False)
    except Exception:
        Sweep.objects.filter(pk=sweep_id).update(driving_until=None)
        raise
    return True


def drive_all() -> list[int]:
    """Drive every active sweep (the studio's start, a worker's heartbeat); the ids driven. A sweep whose
    pass fails is logged and the others go on."""
    driven = []
    for sweep_id in Sweep.objects.filter(state=ACTIVE).values_list("pk", flat=True):
        try:
            if drive(sweep_id):
                driven.append(sweep_id)
        except Exception:  # noqa: BLE001 - one sweep's failure must not stop the others (or the heartbeat)
            log.exception("sweep %s: its driver failed", sweep_id)
    return driven


def step(sweep: Sweep) -> None:
    """Report, prune, tell, then launch while the budget lasts; the sweep ends when nothing is left."""
    if sweep.state != ACTIVE:
        return
    if not sweep.trials.exists():  # a new sweep: its study is made by its first pass (load_if_exists)
        search.create_study(sweep)
    study = search.load(sweep, draws=sweep.trials.count())
    for trial in sweep.trials.filter(state=T_RUNNING).select_related("run"):
        follow(sweep, study, trial)
    launch_next(sweep)


def follow(sweep: Sweep, study, trial: Trial) -> None:
    """Tell Optuna what the trial's run reported since last time; prune it if the rule says so; tell the
    result once the run ended."""
    run = trial.run
    if run is None:  # its run was deleted
        finish_trial(study, trial, T_FAILED, None)
        return
    points = list(MetricPoint.objects.filter(run=run, key=sweep.objective, step__gt=trial.reported_step)
                  .order_by("step").values_list("step", "value"))  # fmt: skip
    handle = search.handle(study, trial.number) if points else None
    for at, value in points:
        handle.report(float(value), at)
    if points:
        trial.reported_step = points[-1][0]
        Trial.objects.filter(pk=trial.pk).update(reported_step=trial.reported_step)
    if run.state == RUNNING and points and sweep.pruner != NO_PRUNING and handle.should_prune():
        prune(sweep, study, trial, run)
        return
    if run.state == SUCCEEDED:
        value = objective(sweep, run)
        finish_trial(study, trial, T_COMPLETE if value is not None else T_FAILED, value)
    elif run.state in (FAILED, CANCELLED):
        finish_trial(study, trial, T_FAILED, objective(sweep, run))


def prune(sweep: Sweep, study, trial: Trial, run: Run) -> None:
    """Stop the run through the normal stop path (saving its last whole step), marked on it and the trial."""
    rule = search.rule(sweep)
    trial.pruned_at_step, trial.pruned_by = trial.reported_step, rule
    line = f"{trial.pruned_note} (sweep {sweep.name!r}, trial {trial.number})"
    events.record(run.pk, [("log", trial.reported_step, {"line": line})])
    with contextlib.suppress(lifecycle.RunActionError):  # it ended meanwhile: pruned all the same
        lifecycle.request_cancel(run, checkpoint=True)
    Trial.objects.filter(pk=trial.pk).update(pruned_at_step=trial.pruned_at_step, pruned_by=rule)
    finish_trial(study, trial, T_PRUNED, objective(sweep, run))


def finish_trial(study, trial: Trial, state: str, value: float | None) -> None:
    import optuna

    states = {T_COMPLETE: optuna.trial.TrialState.COMPLETE, T_PRUNED: optuna.trial.TrialState.PRUNED,
              T_FAILED: optuna.trial.TrialState.FAIL}  # fmt: skip
    # Optuna takes a value only with COMPLETE (a pruned trial's is its last reported one).
    try:
        study.tell(trial.number, value if state == T_COMPLETE else None, state=states[state], skip_if_finished=True)
    except RuntimeError as exc:
        # A grid's last trial: GridSampler.after_trial calls study.stop(), which only an optimize() loop takes.
        # Optuna stores the trial's state all the same (in a `finally`); the sweep's budget ends it.
        if "Study.stop" not in str(exc):
            raise
    Trial.objects.filter(pk=trial.pk).update(state=state, objective=value)


def objective(sweep: Sweep, run: Run) -> float | None:
    """The run's objective: its last (or best) point of the objective key after step 0; None without one."""
    points = MetricPoint.objects.filter(run=run, key=sweep.objective, step__gt=0)
    if sweep.objective_at == BEST:
        points = points.order_by("-value" if sweep.direction == MAXIMIZE else "value")
    else:
        points = points.order_by("-step")
    value = points.values_list("value", flat=True).first()
    return None if value is None else float(value)


def launch_next(sweep: Sweep) -> None:
    """Ask Optuna for trials and launch their runs while trials, places and GPU-hours last; end the sweep
    when none are left and none run."""
    while True:
        running = sweep.trials.filter(state=T_RUNNING).count()
        why_not = budget.exhausted(sweep)
        if why_not:
            if not running:
                Sweep.objects.filter(pk=sweep.pk, state=ACTIVE).update(state=FINISHED, ended_because=why_not)
            return
        if running >= sweep.max_concurrent or start_trial(sweep) is None:
            return


def start_trial(sweep: Sweep) -> Trial | None:
    """One trial asked of Optuna (seeded by the trials so far) and its run launched through the queue (so
    the team's limits apply to it as to any run). None when the run could not launch: the sweep ends saying
    why (the values, or the experiment, are what the launch refused)."""
    import optuna

    study = search.load(sweep, draws=sweep.trials.count())
    asked = study.ask(space.distributions(sweep.parameters))
    values = dict(asked.params)
    try:
        with transaction.atomic():
            run = services.launch(sweep.experiment, sweep.created_by, name=f"{sweep.name} · trial {asked.number}",
                                  overrides=space.overrides(values))  # fmt: skip
            trial = Trial.objects.create(sweep=sweep, number=asked.number, run=run, values=values)
            events.record(run.pk, [("log", 0, {"line": f"trial {asked.number} of sweep {sweep.name!r}: {said(values)}"})])
    except services.LaunchError as exc:
        Trial.objects.create(sweep=sweep, number=asked.number, values=values, state=T_FAILED)
        study.tell(asked.number, state=optuna.trial.TrialState.FAIL)
        why = f"trial {asked.number} could not launch ({said(values)}): {exc}"
        Sweep.objects.filter(pk=sweep.pk).update(state=FINISHED, ended_because=why[:300])
        sweep.state = FINISHED
        return None
    return trial


def said(values: dict) -> str:
    """A trial's values in words: 'optim.lr = 0.001, algorithm.group_size = 4'."""
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in values.items())
