"""Launching an experiment: one function that both the API and the experiment page call."""

from __future__ import annotations

from typing import Any

from studio.experiments import paths, specs
from studio.experiments.models import Experiment
from studio.runs import lifecycle
from studio.runs.models import Checkpoint, Run


class LaunchError(ValueError):
    """Why the experiment cannot launch, as {field: message} (the API answers it as a 400)."""

    def __init__(self, errors: dict[str, Any]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def launch(experiment: Experiment, user, *, kind: str = "train", name: str = "", checkpoint_id: int | None = None,
           overrides: dict[str, Any] | None = None) -> Run:  # fmt: skip
    """A queued run of the experiment's settings (with `overrides` for this run only); `kind="eval"`
    scores the model, or the team's checkpoint `checkpoint_id`, without training. The caller
    checked that the user may edit the experiment."""
    if problem := experiment.dataset.launch_problem():  # still being checked, refused, or rows that fail
        raise LaunchError({"dataset": problem})
    config = specs.deep_merge(experiment.spec_config(name or None), overrides or {})
    if kind == "eval" and checkpoint_id:
        checkpoint = Checkpoint.objects.filter(pk=checkpoint_id, run__team=experiment.team).first()
        if checkpoint is None:
            raise LaunchError({"checkpoint": "no such checkpoint in this team"})
        config = specs.deep_merge(config, {"eval": {"checkpoint": checkpoint.path}})
    try:
        spec = paths.validate_for_team(config, experiment.team)
    except specs.SpecError as exc:
        raise LaunchError(exc.errors) from None
    name = name or f"{experiment.name} #{experiment.runs.count() + 1}" + (" (eval)" if kind == "eval" else "")
    return lifecycle.create_run(experiment.team, spec, kind=kind, name=name, experiment=experiment, user=user)
