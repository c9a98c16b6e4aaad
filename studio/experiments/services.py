"""An experiment's rules, one function each, that both the API and the experiment pages call: what a
saved experiment may choose (`settle`) and launching one (`launch`)."""

from __future__ import annotations

from typing import Any

from studio.accounts import permissions as perms
from studio.experiments import paths, specs
from studio.experiments.models import Experiment
from studio.lib.errors import FieldErrors
from studio.runs import lifecycle, placement
from studio.runs.models import Checkpoint, Run
from trainers.spec import apply_preset

NO_DATASET = (
    "choose a dataset: only an experiment whose settings generate its prompts (data.procedural) runs without one"
)
# The fields an experiment is made of, as a change to it leaves them when it does not name them.
FIELDS = ("team", "dataset", "rubric", "environment", "environment_version", "model_path", "preset", "config", "name")


class ExperimentRefused(FieldErrors, ValueError):
    """Choices the studio's rules refuse for an experiment, as {field: message}; answered as a serializer's
    errors (400 {field: [message]})."""

    listed = True


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


def settle(attrs: dict[str, Any], instance: Experiment | None = None) -> dict[str, Any]:
    """What to save beside the parsed fields `attrs` of a new experiment (or of a change to `instance`):
    {environment_version, config}, the version pinned and the preset's values applied. ExperimentRefused
    naming the field when a rule refuses it: the team stays the same, the dataset, rubric and environment
    are the team's, the version exists, a dataset is chosen unless the settings generate the prompts,
    the dataset can be chosen, and the settings pass the team's path policy (a few queries)."""
    team = attrs.get("team") or instance.team
    if instance is not None and team.pk != instance.team_id:
        raise ExperimentRefused({"team": "an experiment cannot move to another team"})
    for name in ("dataset", "rubric", "environment"):
        chosen = attrs.get(name)
        if chosen is not None and chosen.team_id != team.pk:
            raise ExperimentRefused({name: "must belong to the same team"})
    settled = {"environment_version": _pinned(attrs, instance)}
    config = attrs.get("config", getattr(instance, "config", {})) or {}
    preset = attrs.get("preset", getattr(instance, "preset", ""))
    if preset and "preset" in attrs:
        config = apply_preset(config, preset)  # explicit algorithm keys win over the preset
    settled["config"] = config
    current = {f: getattr(instance, f) for f in FIELDS} if instance is not None else {}
    probe = Experiment(**{**current, **attrs, **settled})
    if probe.dataset is None and not probe.generates_prompts:
        raise ExperimentRefused({"dataset": NO_DATASET})
    errors = {}
    # Refused where it is chosen, not at launch: rows a run would stop at, or a refused file.
    chosen = probe.dataset if not probe.generates_prompts else None
    if chosen is not None and (problem := chosen.choice_problem(probe.skips_invalid_rows)):
        errors["dataset"] = problem
    try:
        paths.validate_for_team(probe.spec_config(), team)
    except specs.SpecError as exc:
        errors.update(exc.errors)
    if errors:
        raise ExperimentRefused(errors)
    return settled


def _pinned(attrs: dict[str, Any], instance: Experiment | None) -> int | None:
    """The environment version to run: the one asked for (it must exist); the latest for null or a newly
    chosen environment; else (left out) the one pinned before; None without an environment."""
    environment = attrs.get("environment", getattr(instance, "environment", None))
    if environment is None:
        return None
    asked = attrs.get("environment_version")
    if asked is not None:
        if not environment.versions.filter(number=asked).exists():
            raise ExperimentRefused(
                {"environment_version": f"{environment.name!r} has versions 1 to {environment.version}"}
            )
        return asked
    kept = "environment_version" not in attrs and getattr(instance, "environment_id", None) == environment.pk
    return instance.environment_version if kept else environment.version


def clone_name(source: Experiment) -> str:
    """The name a copy of `source` starts with."""
    return f"{source.name} (copy)"


def clone_description(source: Experiment) -> str:
    """What a copy of `source` says it is (not the source's own description, which describes the source)."""
    return f"A copy of {source.name!r} (experiment {source.pk})."
