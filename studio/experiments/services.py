"""Launching an experiment: one function that both the API and the experiment page call."""

from __future__ import annotations

from typing import Any

from studio.accounts import permissions as perms
from studio.experiments import paths, specs
from studio.experiments.models import Experiment
from studio.lib.errors import FieldErrors
from studio.runs import lifecycle, placement
from studio.runs.models import Checkpoint, Run


class LaunchError(FieldErrors, ValueError):
    """Why the experiment cannot launch, as {field: message} (the API answers it as a 400)."""


def launch(experiment: Experiment, user, *, kind: str = "train", name: str = "", checkpoint_id: int | None = None,
           overrides: dict[str, Any] | None = None) -> Run:  # fmt: skip
    """A queued run of the experiment's settings (with `overrides` for this run only); `kind="eval"`
    scores the model, or the team's checkpoint `checkpoint_id`, without training. The caller
    checked that the user may edit the experiment."""
    if experiment.environment_id and not perms.has_role(user, experiment.environment.team_id, perms.VIEW):
        # The experiment's team owns its environment (the serializer checks it), so this is a row
        # changed behind the API's back: its tools would run under a team that cannot read them.
        raise LaunchError({"environment": "you cannot see this environment; choose one of your team's"})
    config = specs.deep_merge(experiment.spec_config(name or None), overrides or {})
    # still being checked, refused, or rows that fail (unless the run leaves them out); a run that
    # generates its prompts never reads it
    skip = isinstance(config.get("data"), dict) and config["data"].get("skip_invalid_rows") is True
    if not experiment.generates_prompts and (problem := experiment.dataset.launch_problem(skip)):
        raise LaunchError({"dataset": problem})
    if kind == "eval" and checkpoint_id:
        checkpoint = Checkpoint.objects.filter(pk=checkpoint_id, run__team=experiment.team).first()
        if checkpoint is None:
            raise LaunchError({"checkpoint": "no such checkpoint in this team"})
        config = specs.deep_merge(config, {"eval": {"checkpoint": checkpoint.path}})
    try:
        spec = paths.validate_for_team(config, experiment.team)
    except specs.SpecError as exc:
        raise LaunchError(exc.errors) from None
    if refused := placement.refusal(spec, kind):
        raise LaunchError({"parallel.nodes": refused})
    name = name or f"{experiment.name} #{experiment.runs.count() + 1}" + (" (eval)" if kind == "eval" else "")
    return lifecycle.create_run(experiment.team, spec, kind=kind, name=name, experiment=experiment, user=user)


def clone_name(source: Experiment) -> str:
    """The name a copy of `source` starts with."""
    return f"{source.name} (copy)"


def clone_description(source: Experiment) -> str:
    """What a copy of `source` says it is (not the source's own description, which describes the source)."""
    return f"A copy of {source.name!r} (experiment {source.pk})."
