"""The driver with the real Optuna on the test database: trials launched as ordinary queued runs with their
values, validation points told to Optuna as they are written, a trial below the median pruned through the
normal stop path (marked on its run), the next trials launched while the budget lasts, the sweep ended, and
the best trial found again by a fresh load of the study from the database (a restarted studio)."""

from __future__ import annotations

import optuna
import pytest
from django.db import transaction

from studio.runs import lifecycle, reports
from studio.runs.models import CANCELLED, QUEUED, SUCCEEDED
from studio.sweeps import driver, search, services
from studio.sweeps import storage as sweep_storage
from studio.sweeps.models import FINISHED, Trial
from tests.studio.sweeps.conftest import LR_AND_GROUP

pytestmark = pytest.mark.django_db(transaction=True)


def make(experiment, alice, **fields):
    options = {"parameters": LR_AND_GROUP, "sampler": "tpe", "pruner": "median", "pruner_startup_trials": 1,
               "max_trials": 4, "max_concurrent": 2, "seed": 7, **fields}  # fmt: skip
    sweep = services.create(experiment, alice, options)
    assert not sweep.trials.exists()  # the driver makes its study and launches (a worker's heartbeat)
    assert driver.drive(sweep.pk)
    return sweep


def report(run, step: int, value: float) -> None:
    """A validation point as the worker's reporter writes it (one transaction; the driver hears it after)."""
    with transaction.atomic():
        reports.write(run.pk, "metrics", step, {"val/reward/mean": value, "val/pass@1": value})


def start(trial: Trial):
    assert lifecycle.start(trial.run_id, "worker@test")
    trial.run.refresh_from_db()
    return trial.run


def lines(run) -> list[str]:
    return [e.payload.get("line", "") for e in run.events.filter(kind="log").order_by("seq")]


def test_it_launches_trials_as_queued_runs_of_the_experiment_with_their_values(experiment, alice):
    sweep = make(experiment, alice)
    trials = list(sweep.trials.select_related("run"))
    assert [t.number for t in trials] == [0, 1]  # two at once
    for t in trials:
        assert t.run.state == QUEUED and t.run.experiment_id == experiment.pk and t.run.created_by == alice
        assert set(t.values) == {"optim.lr", "algorithm.group_size"}
        assert 1e-6 <= t.values["optim.lr"] <= 1e-2 and t.values["algorithm.group_size"] in (2, 4, 6, 8)
        assert t.run.spec["optim"]["lr"] == t.values["optim.lr"]
        assert t.run.spec["algorithm"]["group_size"] == t.values["algorithm.group_size"]
        assert t.run.spec["optim"]["total_steps"] == 3  # the rest is the experiment's
        assert any(line.startswith(f"trial {t.number} of sweep") for line in lines(t.run))
    assert trials[0].values != trials[1].values  # seeded per draw: the second is not the first again


def test_a_trial_below_the_median_is_pruned_through_the_stop_path_and_the_best_survives_a_restart(experiment, alice):
    sweep = make(experiment, alice)
    first, second = sweep.trials.select_related("run")
    a, b = start(first), start(second)
    for step, value in ((0, 0.2), (1, 0.6), (2, 0.7), (3, 0.8)):
        report(a, step, value)
    assert lifecycle.finish(a.pk, SUCCEEDED)
    first.refresh_from_db()
    assert first.state == "complete" and first.objective == pytest.approx(0.8) and first.reported_step == 3
    third = sweep.trials.get(number=2)  # a place was free: the next trial launched
    assert third.run.state == QUEUED

    report(b, 0, 0.2)  # the step-0 baseline says nothing of the settings: not told, never pruned on
    b.refresh_from_db()
    assert not b.cancel_requested
    report(b, 1, 0.1)  # below the completed trial's 0.6 at step 1
    b.refresh_from_db()
    second.refresh_from_db()
    assert b.cancel_requested and b.stop_saves_checkpoint  # the normal stop, keeping its last whole step
    assert second.state == "pruned" and second.pruned_at_step == 1
    note = f"pruned at step 1 by {search.rule(sweep)} (sweep {sweep.name!r}, trial 1)"
    assert note in lines(b)
    assert b.metric_points.filter(key="val/reward/mean").count() == 2  # it keeps what it reported
    assert lifecycle.finish(b.pk, CANCELLED)  # its worker ends it; the trial stays pruned
    second.refresh_from_db()
    assert second.state == "pruned"

    # The studio restarts: a fresh storage and study, loaded from the database alone.
    sweep_storage._storages.clear()
    study = optuna.load_study(study_name=sweep.study_name, storage=sweep_storage.storage())
    assert study.best_trial.number == 0 and study.best_value == pytest.approx(0.8)
    states = {t.number: t.state for t in study.trials}
    assert states[1] == optuna.trial.TrialState.PRUNED and states[0] == optuna.trial.TrialState.COMPLETE
    assert study.trials[1].intermediate_values == {1: 0.1}

    driver.drive_all()  # the start-up pass launches what the budget still allows
    assert sweep.trials.count() == 4 and sweep.trials.filter(state="running").count() == 2
    for trial in sweep.trials.filter(state="running").select_related("run"):
        run = start(trial)
        report(run, 1, 0.9)
        lifecycle.finish(run.pk, SUCCEEDED)
    sweep.refresh_from_db()
    assert sweep.state == FINISHED and sweep.ended_because == "its 4 trials run"
    summary = services.summary(sweep)
    assert summary["counts"] == {"running": 0, "complete": 3, "pruned": 1, "failed": 0}
    assert summary["best_objective"] == pytest.approx(0.9)
    assert set(search.importances(sweep)) == {"optim.lr", "algorithm.group_size"}


def test_a_failed_trial_is_told_as_failed_and_its_place_is_taken(experiment, alice):
    sweep = make(experiment, alice, max_concurrent=1, max_trials=2)
    (trial,) = sweep.trials.all()
    run = start(trial)
    lifecycle.finish(run.pk, "failed", error="boom")
    trial.refresh_from_db()
    assert trial.state == "failed" and trial.objective is None
    assert sweep.trials.count() == 2
    study = search.load(sweep)
    assert study.trials[0].state == optuna.trial.TrialState.FAIL


def test_a_grid_sweep_tries_each_combination_once_and_ends(experiment, alice):
    parameters = [{"name": "algorithm.group_size", "kind": "int", "low": 2, "high": 4, "step": 2},
                  {"name": "optim.lr", "kind": "float", "low": 1e-5, "high": 1e-3, "log": True, "points": 2}]  # fmt: skip
    sweep = make(experiment, alice, parameters=parameters, sampler="grid", pruner="none", max_trials=10,
                 max_concurrent=10)  # fmt: skip
    seen = {(t.values["algorithm.group_size"], round(t.values["optim.lr"], 8)) for t in sweep.trials.all()}
    assert seen == {(2, 1e-5), (2, 1e-3), (4, 1e-5), (4, 1e-3)}
    for trial in sweep.trials.select_related("run"):
        run = start(trial)
        report(run, 1, 0.5)
        lifecycle.finish(run.pk, SUCCEEDED)
    sweep.refresh_from_db()
    assert sweep.state == FINISHED and sweep.ended_because == "its grid's 4 trials run"


def test_a_gpu_hours_budget_stops_new_trials(experiment, alice):
    sweep = make(experiment, alice, max_concurrent=1, max_gpu_hours=0.5)
    (trial,) = sweep.trials.all()
    run = start(trial)
    type(run).objects.filter(pk=run.pk).update(gpu_seconds=1800.0)  # as its worker's usage records it
    report(run, 1, 0.5)
    lifecycle.finish(run.pk, SUCCEEDED)
    sweep.refresh_from_db()
    assert sweep.trials.count() == 1
    assert sweep.state == FINISHED and sweep.ended_because == "its GPU-hours budget is spent (0.50 of 0.5)"


def test_a_second_driver_finding_the_sweep_held_asks_the_holder_to_pass_again(experiment, alice):
    sweep = make(experiment, alice)
    assert driver.claimed(sweep.pk)
    assert not driver.drive(sweep.pk)  # held: it asks for another pass instead
    sweep.refresh_from_db()
    assert sweep.drive_again
    assert driver.release(sweep.pk)  # the holder passes again ...
    assert not driver.release(sweep.pk)  # ... then lets go
    sweep.refresh_from_db()
    assert sweep.driving_until is None
