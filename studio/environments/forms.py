"""The environment editor: the kind, its params form (from the kind's params_model schema) and
the episode limits (from EnvironmentSpec's schema), read back from the POST; and the "try it" rows.

Inputs are named by the config's dotted paths ("config.params.tools", "config.max_turns"), the
keys the API's errors come under, so each error shows beside its field."""

from __future__ import annotations

import json
import re
from typing import Any

from studio.accounts import permissions as perms
from studio.datasets.models import Dataset
from studio.lib import json_limits
from studio.lib.schema_form import FormField, fields_for, read_fields
from studio.rubrics.forms import dataset_row
from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS, TOOL_KINDS, tool_example
from trainers.spec import EnvironmentSpec

PREFIX = "config."
# EnvironmentSpec fields drawn by the editor itself: the kind select, and the kind's params form.
OWN_FIELDS = (f"{PREFIX}kind", f"{PREFIX}params")
# A kind's setting holding a list of tools ({"kind", "params"} each), as the tools kind has.
TOOLS_PARAM = "tools"
NAME = re.compile(r"[A-Za-z_][\w-]*")


def kind_names() -> list[str]:
    return ENVIRONMENT_KINDS.names()


def kind_doc(kind: str) -> str:
    return ENVIRONMENT_KINDS.get(kind).description.strip() if kind in ENVIRONMENT_KINDS else ""


def params_fields(kind: str, params: dict[str, Any], errors: dict[str, str]) -> list[FormField]:
    if kind not in ENVIRONMENT_KINDS:
        return []
    schema = ENVIRONMENT_KINDS.get(kind).params_model.model_json_schema()
    fields = fields_for(schema, schema, f"{PREFIX}params.", params or {}, errors)
    for f in fields:
        if f.name == f"{PREFIX}params.{TOOLS_PARAM}" and f.kind == "json":
            describe_tools(f)
    return fields


def describe_tools(f: FormField) -> None:
    """The tools field's help (each registered tool kind, what it does and its settings), its
    example, and its shorthand: tool names separated by commas."""
    kinds = []
    for name, model in TOOL_KINDS.items():
        schema = model.model_json_schema()
        required = set(schema.get("required", []))
        settings = [f"{p}{' (required)' if p in required else ''}" for p in schema.get("properties", {})]
        doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
        kinds.append(f"{name}: {doc}" + (f" Settings: {', '.join(settings)}." if settings else ""))
    f.help = (f"{f.help} Example: {tools_shape()}. Tool kinds — {' '.join(kinds)} "
              f"Or type tool names separated by commas ({', '.join(TOOL_KINDS.names()[:2])}): "
              f'each is short for {{"kind": name}}.')  # fmt: skip
    f.shorthand = tools_shorthand
    f.picker = TOOLS_PARAM


def tool_kinds() -> list[dict[str, Any]]:
    """What the tools picker (tools_picker.js) offers: each registered tool kind, the first line of its
    docstring, and its settings as fields made from its params schema (label, input, help, default,
    bounds, choices). A required setting that is code starts with its schema's example (a function to
    edit); other required settings show their example as a placeholder."""
    kinds = []
    for name, model in TOOL_KINDS.items():
        schema = model.model_json_schema()
        required = set(schema.get("required", []))
        starts = tool_example(name).get("params", {})
        fields = []
        for f in fields_for(schema, schema, "", {}, {}):
            code = f.widget == "textarea" and f.kind == "string"
            fields.append({
                "name": f.name, "label": f.label, "widget": f.widget, "kind": f.kind, "help": f.help,
                "default": f.default, "required": f.name in required, "nullable": f.nullable, "choices": f.choices,
                "minimum": f.minimum, "maximum": f.maximum, "step": f.step, "placeholder": f.placeholder,
                "code": code, "initial": starts.get(f.name) if code and f.name in required else None,
            })  # fmt: skip
        doc = (model.__doc__ or "").strip().splitlines()
        kinds.append({"kind": name, "doc": doc[0] if doc else "", "fields": fields})
    return kinds


def tools_shape() -> str:
    """A tools list as one line, with long settings (code) cut to "...": the shape, not the values."""

    def brief(value: Any) -> Any:
        if isinstance(value, str) and ("\n" in value or len(value) > 24):
            return "..."
        return {k: brief(v) for k, v in value.items()} if isinstance(value, dict) else value

    return json.dumps([brief(tool_example(name)) for name in TOOL_KINDS.names()])


def tools_shorthand(text: str) -> list[dict[str, Any]]:
    """Tool names separated by commas ("calculator, python") as a tools list ([{"kind": "calculator"},
    {"kind": "python"}]); ValueError showing the expected shape and the tool kinds otherwise."""
    names = [name for name in re.split(r"[\s,]+", text.strip()) if name]
    kinds = ", ".join(TOOL_KINDS.names())
    expected = f"Expected a JSON list like {tools_shape()}, or tool names separated by commas; tool kinds: {kinds}."
    if not names or not all(NAME.fullmatch(name) for name in names):
        raise ValueError(f"not a list of tools. {expected}")
    unknown = [name for name in names if name not in TOOL_KINDS]
    if unknown:
        raise ValueError(f"unknown tool kind {unknown[0]!r}. {expected}")
    for name in names:
        needed = TOOL_KINDS.get(name).model_json_schema().get("required", [])
        if needed:
            raise ValueError(f"the {name} tool needs settings ({', '.join(needed)}): write the list as JSON, "
                             f"with {json.dumps(tool_example(name))}")  # fmt: skip
    return [{"kind": name} for name in names]


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
        fields = json_limits.loads(trial["fields"] or "{}")
    except ValueError as exc:  # not JSON, or past a limit of studio.lib.json_limits
        raise ValueError(f"extra fields: not valid JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise ValueError('extra fields: a JSON object, like {"difficulty": 2}')
    return [{**fields, "prompt": trial["prompt"], **({"answer": trial["answer"]} if trial["answer"] else {})}]
