"""A sweep's actions, one function each, that the API and the pages both call: create (checked, its study
made, its first trials launched), stop, and a trial made an experiment of its own."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from studio.experiments import paths, specs
from studio.experiments.api import ExperimentSerializer
from studio.experiments.models import Experiment
from studio.experiments.services import ExperimentRefused, settle
from studio.lib.errors import FieldErrors
from studio.runs import lifecycle
from studio.runs.models import QUEUED, RUNNING
from studio.sweeps import budget, driver, search, space
from studio.sweeps.models import ACTIVE, STOPPED, T_FAILED, T_RUNNING, Sweep, Trial

MAX_TRIALS = 1000


class SweepRefused(FieldErrors, ValueError):
    """A sweep the rules refuse, as {field: why} (the API answers 400)."""


def check_settings(experiment: Experiment, parameters: list[dict[str, Any]], sampler: str) -> list[dict[str, Any]]:
    """The parameters checked against the schema, and the experiment's settings with each range's ends
    validated as a run's would be (so a trial is not the first to find a value the spec refuses)."""
    checked = space.check(parameters, sampler)
    base = experiment.spec_config()
    errors: dict[str, str] = {}
    for i, p in enumerate(checked):
        ends = p["choices"] if p["kind"] == space.CHOICE else [p["low"], p["high"]]
        for value in ends:
            try:
                paths.validate_for_team(specs.deep_merge(base, space.overrides({p["name"]: value})), experiment.team)
            except specs.SpecError as exc:
                why = "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
                errors.setdefault(f"parameters[{i}]", f"{p['name']} = {value!r}: the settings are refused: {why}")
    if errors:
        raise SweepRefused(errors)
    return checked


def create(experiment: Experiment, user, fields: dict[str, Any]) -> Sweep:
    """A sweep of `experiment` (the caller checked the user may edit it); SweepRefused naming the field for
    what the rules refuse. Its study and first trials are the driver's, at the next worker heartbeat (seconds:
    studio.sweeps.driver): the web request never pays Optuna's import and storage set-up (seconds on a busy
    machine), and a sweep is driven from one kind of place."""
    fields = dict(fields)
    fields["parameters"] = check_settings(experiment, fields.get("parameters"), fields.get("sampler", "tpe"))
    if fields.get("max_concurrent", 1) > fields.get("max_trials", 1):
        raise SweepRefused({"max_concurrent": "at most the number of trials"})
    sweep = Sweep(team=experiment.team, experiment=experiment, created_by=user,
                  study_name=f"studio-sweep-{uuid.uuid4().hex}", **fields)  # fmt: skip
    sweep.name = sweep.name or f"{experiment.name} sweep"
    sweep.save()
    return sweep


def stop(sweep: Sweep) -> Sweep:
    """No more trials; the running ones stop through the normal stop path (each keeping its last step)."""
    import optuna

    Sweep.objects.filter(pk=sweep.pk, state=ACTIVE).update(state=STOPPED, ended_because="stopped by a user")
    running = list(sweep.trials.filter(state=T_RUNNING).select_related("run"))
    study = search.load(sweep) if running else None  # Optuna only when there is something to tell it
    for trial in running:
        if trial.run is not None and trial.run.state in (QUEUED, RUNNING):
            with contextlib.suppress(lifecycle.RunActionError):  # it ended meanwhile
                lifecycle.request_cancel(trial.run)
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        Trial.objects.filter(pk=trial.pk).update(state=T_FAILED, objective=driver.objective(sweep, trial.run)
                                                 if trial.run else None)  # fmt: skip
    sweep.refresh_from_db()
    return sweep


def trial_experiment(trial: Trial, user, context: dict[str, Any]) -> Experiment:
    """A new experiment of the sweep's experiment with the trial's values, in the same team (`context`: the
    request's serializer context, whose user the team field checks)."""
    source = trial.sweep.experiment
    payload = {
        "team": source.team_id, "dataset": source.dataset_id, "rubric": source.rubric_id,
        "environment": source.environment_id, "environment_version": source.environment_version,
        "model_path": source.model_path, "name": f"{source.name} (sweep trial {trial.number})"[:200],
        "description": f"The values of trial {trial.number} of sweep {trial.sweep.name!r}: {driver.said(trial.values)}.",
        "config": specs.deep_merge(source.config, space.overrides(trial.values)),
    }  # fmt: skip
    serializer = ExperimentSerializer(data=payload, context=context)
    if not serializer.is_valid():
        raise SweepRefused({k: "; ".join(map(str, v)) if isinstance(v, list) else str(v)
                            for k, v in serializer.errors.items()})  # fmt: skip
    try:
        settled = settle(serializer.validated_data)
    except ExperimentRefused as exc:
        raise SweepRefused(exc.errors) from None
    return serializer.save(created_by=user, preset=source.preset, **settled)


def summary(sweep: Sweep) -> dict[str, Any]:
    """Numbers the sweep page and the API show: trials by state, the best trial, GPU-hours used."""
    trials = list(sweep.trials.all())
    done = [t for t in trials if t.objective is not None and t.state == "complete"]
    pick = max if sweep.direction == "maximize" else min
    best = pick(done, key=lambda t: t.objective) if done else None
    counts = {state: sum(t.state == state for t in trials) for state in ("running", "complete", "pruned", "failed")}
    return {"trials": len(trials), "limit": budget.trial_limit(sweep), "counts": counts,
            "best_trial": best.number if best else None, "best_objective": best.objective if best else None,
            "gpu_hours_used": budget.gpu_hours_used(sweep)}  # fmt: skip


def delete(sweep: Sweep) -> None:
    """The sweep, its trials' rows and its study go; its runs stay (ordinary runs of the experiment)."""
    import optuna

    if sweep.state == ACTIVE:
        stop(sweep)
    name, made = sweep.study_name, sweep.trials.exists()  # its first pass made the study with its first trial
    sweep.delete()
    if made:
        with contextlib.suppress(KeyError):  # a study already gone
            optuna.delete_study(study_name=name, storage=search.storage.storage())
