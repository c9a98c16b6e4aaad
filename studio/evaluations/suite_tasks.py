"""A suite's tasks as the studio stores them, and as the trainer reads them.

Stored (`Suite.tasks`), each task names the team's objects it reads by id, so a suite follows its
dataset's and rubric's current versions:

    {"name": "sums", "dataset": 3, "rubric": 5, "environment": null, "samples_per_prompt": 4,
     "num_prompts": 50, "pass_threshold": null, "temperature": null, "top_p": null, "max_new_tokens": null}

or, instead of a dataset, `"procedural": {"task": "arithmetic", ...}` (trainers.spec.ProceduralSpec).
`resolve` turns them into trainers.spec.suite.SuiteTaskSpec configs (the dataset's file and field mapping,
the rubric's spec, the environment's config), which is what a suite run keeps.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import Field, ValidationError

from studio.datasets.models import Dataset
from studio.environments.models import Environment
from studio.lib.errors import FieldErrors
from studio.lib.params import MAX_ID
from studio.rubrics.models import Rubric
from trainers.spec import ProceduralSpec, Section, validation_errors
from trainers.spec.suite import SuiteTaskSpec

REFERENCES = {"dataset": Dataset, "rubric": Rubric, "environment": Environment}
SETTINGS = ("samples_per_prompt", "num_prompts", "pass_threshold", "temperature", "top_p", "max_new_tokens")
MAX_TASKS = 64
_FIELDS = SuiteTaskSpec.model_fields


class StoredTask(Section):
    """One task as a suite stores it: the team's objects by id, and the task's settings (as SuiteTaskSpec's)."""

    name: str = _FIELDS["name"]
    dataset: int | None = Field(
        None, ge=1, le=MAX_ID, description="A dataset of the team; or procedural instead (one of the two)."
    )
    procedural: ProceduralSpec | None = Field(None, description="Generated prompts instead of a dataset.")
    rubric: int = Field(..., ge=1, le=MAX_ID, description="A rubric of the team.")
    environment: int | None = Field(None, ge=1, le=MAX_ID, description="An environment of the team; none: one turn.")
    samples_per_prompt: int = _FIELDS["samples_per_prompt"]
    num_prompts: int | None = _FIELDS["num_prompts"]
    pass_threshold: float | None = _FIELDS["pass_threshold"]
    temperature: float | None = _FIELDS["temperature"]
    top_p: float | None = _FIELDS["top_p"]
    max_new_tokens: int | None = _FIELDS["max_new_tokens"]


def tasks_schema() -> dict[str, Any]:
    """The JSON schema of `Suite.tasks` (for the API's description of it)."""
    from studio.lib.api_schema import settings_schema

    item = settings_schema(StoredTask)
    defs = item.pop("$defs", {})
    return {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_TASKS, "$defs": defs}


class TasksRefused(FieldErrors, ValueError):
    """Tasks the studio refuses, as {"tasks.<i>.<field>": why} (the API answers 400)."""


def resolve(tasks: Any, team) -> list[dict[str, Any]]:
    """The stored tasks as validated SuiteTaskSpec dicts, reading the team's objects they name; TasksRefused
    naming each bad field (`tasks.<i>.dataset`, `tasks.<i>.rubric.criteria`...). A few queries per task."""
    if not isinstance(tasks, list) or not tasks:
        raise TasksRefused({"tasks": "a list of at least one task"})
    if len(tasks) > MAX_TASKS:
        raise TasksRefused({"tasks": f"at most {MAX_TASKS} tasks"})
    errors: dict[str, str] = {}
    resolved = []
    for i, task in enumerate(tasks):
        try:
            resolved.append(_resolve_one(task, team))
        except TasksRefused as exc:
            errors |= {f"tasks.{i}.{k}" if k else f"tasks.{i}": v for k, v in exc.errors.items()}
    names = [t["name"] for t in resolved]
    if not errors and (dupes := sorted({n for n in names if names.count(n) > 1})):
        errors["tasks"] = f"task names must be unique; repeated: {', '.join(dupes)}"
    if errors:
        raise TasksRefused(errors)
    return resolved


def _resolve_one(raw: Any, team) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TasksRefused({"": "a task is an object: {name, dataset or procedural, rubric, ...}"})
    try:
        task = StoredTask.model_validate(raw).model_dump(mode="json")
    except ValidationError as exc:
        raise TasksRefused(validation_errors(exc)) from None
    rows = {name: _team_object(task, name, model, team) for name, model in REFERENCES.items()}
    procedural = task.get("procedural")
    if (rows["dataset"] is None) == (procedural is None):
        raise TasksRefused({"dataset": "choose a dataset, or a procedural task instead (one of the two)"})
    if rows["dataset"] is not None and (problem := rows["dataset"].launch_problem()):
        raise TasksRefused({"dataset": problem})
    data = rows["dataset"].data_spec() if rows["dataset"] is not None else {"procedural": procedural}
    config = {
        "name": task.get("name"),
        "data": data,
        "rubric": copy.deepcopy(rows["rubric"].spec),
        "environment": copy.deepcopy(rows["environment"].config) if rows["environment"] else None,
        **{key: task[key] for key in SETTINGS if task.get(key) is not None},
    }
    try:
        return SuiteTaskSpec.model_validate(config).model_dump(mode="json")
    except ValidationError as exc:
        raise TasksRefused(validation_errors(exc)) from None


def _team_object(task: dict[str, Any], name: str, model, team):
    value = task.get(name)
    if value is None:
        return None
    row = model.objects.filter(pk=value, team=team).first()
    if row is None:
        raise TasksRefused({name: f"{name} {value} does not exist in this team"})
    return row
