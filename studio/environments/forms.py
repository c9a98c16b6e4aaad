"""The environment editor: the kind, its params form (from the kind's params_model schema) and
the episode limits (from EnvironmentSpec's schema), read back from the POST; and the "try it" rows.

Inputs are named by the config's dotted paths ("config.params.tools", "config.max_turns"), the
keys the API's errors come under, so each error shows beside its field."""

from __future__ import annotations

import json
from typing import Any

from studio.accounts import permissions as perms
from studio.datasets.models import Dataset
from studio.lib.schema_form import FormField, fields_for, read_fields
from studio.rubrics.forms import dataset_row
from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS
from trainers.spec import EnvironmentSpec

PREFIX = "config."
# EnvironmentSpec fields drawn by the editor itself: the kind select, and the kind's params form.
OWN_FIELDS = (f"{PREFIX}kind", f"{PREFIX}params")


def kind_names() -> list[str]:
    return ENVIRONMENT_KINDS.names()


def kind_doc(kind: str) -> str:
    return ENVIRONMENT_KINDS.get(kind).description.strip() if kind in ENVIRONMENT_KINDS else ""


def params_fields(kind: str, params: dict[str, Any], errors: dict[str, str]) -> list[FormField]:
    if kind not in ENVIRONMENT_KINDS:
        return []
    schema = ENVIRONMENT_KINDS.get(kind).params_model.model_json_schema()
    return fields_for(schema, schema, f"{PREFIX}params.", params or {}, errors)


def limit_fields(config: dict[str, Any], errors: dict[str, str]) -> list[FormField]:
    schema = EnvironmentSpec.model_json_schema()
    return fields_for(schema, schema, PREFIX, config, errors, skip=OWN_FIELDS)


def fold_errors(errors: dict[str, str], names: set[str]) -> dict[str, str]:
    """Errors about a part of a field ("config.params.tools.0": an unknown tool kind) shown beside that
    field ("config.params.tools"), prefixed with the part's place; other keys as they are."""
    out: dict[str, str] = {}
    for key, message in errors.items():
        field = next((name for name in names if key.startswith(f"{name}.")), None)
        if field is None:
            out[key] = f"{out[key]} {message}" if key in out else message
        else:
            text = f"{key.removeprefix(field + '.')}: {message}"
            out[field] = f"{out[field]} {text}" if field in out else text
    return out


def read_environment(post) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(config, {name, description, team}, parse errors by field) from the editor's POST.

    The params are read only for the kind the form showed: after the kind select changes, the
    old kind's inputs mean nothing to the new one (the page redraws with the new kind's form)."""
    kind = post.get(f"{PREFIX}kind", "")
    fields = limit_fields({}, {})
    if kind and post.get("shown_kind") == kind:
        fields += params_fields(kind, {}, {})
    values, errors = read_fields(fields, post)
    config: dict[str, Any] = {"kind": kind, "params": {}, **values.get("config", {})}
    meta = {"name": post.get("name", ""), "description": post.get("description", ""), "team": post.get("team")}
    return config, meta, errors


def trial_rows(trial: dict[str, str], post, user) -> list[dict[str, Any]]:
    """The rows "try it" runs: a typed prompt (with answer and extra fields), or a dataset row."""
    if post.get("try_dataset") and post.get("try_row"):
        dataset = perms.get_for(user, Dataset.objects.all(), post["try_dataset"])
        return [dataset_row(dataset, int(post["try_row"]))]
    if not trial["prompt"].strip():
        raise ValueError("type a prompt (or pick a dataset row)")
    try:
        fields = json.loads(trial["fields"] or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"extra fields: not valid JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise ValueError('extra fields: a JSON object, like {"difficulty": 2}')
    return [{**fields, "prompt": trial["prompt"], **({"answer": trial["answer"]} if trial["answer"] else {})}]
