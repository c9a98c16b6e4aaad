"""Render form fields from a pydantic JSON schema and read them back from POST data.

The experiment form and the rubric editor both come from the trainer library's schema
(`RunSpec.model_json_schema()`, each criterion kind's params model): help text, bounds,
choices and defaults are declared once, in `trainers/`. Fields that the schema types as a
free string but that the trainer checks against a catalog get that catalog as choices.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from studio.lib import json_limits
from trainers.algorithms.catalog import (
    ADVANTAGE_ESTIMATORS,
    KL_ESTIMATORS,
    LOSS_AGG_MODES,
    OFF_POLICY_CORRECTIONS,
    POLICY_LOSSES,
)
from trainers.curriculum.catalog import BUDGETS, SAMPLERS
from trainers.spec import PRESETS

# String settings edited as several lines (a textarea that keeps every line break): these names,
# any name ending in "prompt", and any whose default or examples hold a line break.
MULTILINE_NAMES = ("code", "rubric", "formula")

# Each catalogue's entries with what they do: the choices of a select, and each option's title.
CATALOGS: dict[str, dict[str, str]] = {
    "algorithm.advantage_estimator": ADVANTAGE_ESTIMATORS,
    "algorithm.policy_loss": POLICY_LOSSES,
    "algorithm.loss_agg_mode": LOSS_AGG_MODES,
    "algorithm.kl_estimator": KL_ESTIMATORS,
    "algorithm.correction": OFF_POLICY_CORRECTIONS,  # nullable: the select leads with "" (none)
    "curriculum.sampler": SAMPLERS,
    "curriculum.budget": BUDGETS,
}
CATALOG_CHOICES: dict[str, list[str]] = {
    **{name: list(catalog) for name, catalog in CATALOGS.items()},
    "algorithm.preset": ["", *PRESETS],
}


@dataclass
class FormField:
    name: str  # dotted path, also the input name
    label: str
    widget: str  # number | checkbox | select | text | textarea | json
    help: str = ""
    value: Any = None
    choices: list[str] = field(default_factory=list)
    minimum: float | None = None
    maximum: float | None = None
    step: str = "any"
    nullable: bool = False
    error: str = ""
    kind: str = "string"  # integer | number | boolean | string | list | json
    note: str = ""  # what this server can run of the field's choices (e.g. why vLLM is off)
    default: Any = None  # the schema's default (None where it has none, or a default_factory)
    baseline: str | None = None  # what a preset or the default gives, shown; None: not compared
    baseline_from: str = ""  # "preset" or "default": where `baseline` comes from
    changed: bool = False  # the value differs from `baseline`
    placeholder: str = ""  # an example of the value, shown in the empty input
    # For a json field: reads text that is not JSON (a shorthand such as a bare name) or raises
    # ValueError saying what is expected; None: such text is an error.
    shorthand: Callable[[str], Any] | None = None
    # A json field the page also edits with a picker (its script's name, as "tools"); the JSON stays the input.
    picker: str = ""
    choice_help: dict[str, str] = field(default_factory=dict)  # a select's option -> what it does (its title)
    suggestions: list[tuple[str, str]] = field(default_factory=list)  # a text input's (value, label) offered below it

    @property
    def bounds(self) -> str:
        parts = []
        if self.minimum is not None:
            parts.append(f"min {self.minimum:g}")
        if self.maximum is not None:
            parts.append(f"max {self.maximum:g}")
        return ", ".join(parts)

    @property
    def display_value(self) -> str:
        return display(self.kind, self.value)

    @property
    def default_display(self) -> str:
        return display(self.kind, self.default)

    def compare_with(self, baseline: Any, source: str) -> None:
        """Mark the field changed when its value differs from `baseline` (what the preset, or the
        schema default, `source`, gives it); the form shows the baseline beside a changed field."""
        self.baseline, self.baseline_from = display(self.kind, baseline), source
        self.changed = normalized(self.kind, self.display_value) != normalized(self.kind, self.baseline)


def display(kind: str, value: Any) -> str:
    """A value as its form input shows it."""
    if value is None:
        return ""
    if kind == "list":
        return "\n".join(str(v) for v in value)
    if kind == "json":
        return json.dumps(value, indent=2)
    return str(value)


def normalized(kind: str, text: str) -> str:
    """Input text in a form where equal values compare equal ("0.20" and "2e-1", "True" and "on").
    experiment_form.js normalises the browser's input values the same way."""
    text = text.strip()
    if kind in ("integer", "number") and text:
        try:
            return repr(float(text))
        except ValueError:
            return text
    if kind == "boolean":
        return str(text.lower() in ("true", "1", "on"))
    if kind == "list":
        return "\n".join(line.strip() for line in text.splitlines() if line.strip())
    if kind == "json" and text:
        try:
            return json.dumps(json_limits.loads(text), sort_keys=True)
        except ValueError:
            return text
    return text


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref:
        return schema["$defs"][ref.split("/")[-1]]
    return node


def fields_for(schema: dict[str, Any], node: dict[str, Any], prefix: str, values: dict[str, Any],
               errors: dict[str, str], skip: tuple[str, ...] = ()) -> list[FormField]:  # fmt: skip
    """One FormField per property of `node` (an object schema), named `prefix + property`; a property
    that is a section of its own (`subsection`) gives one field per property of that section instead."""
    out = []
    for prop, raw in _resolve(schema, node).get("properties", {}).items():
        name = f"{prefix}{prop}"
        if name in skip:
            continue
        section = subsection(schema, raw)
        if section is not None:
            out += _section_fields(schema, section, raw, name, prop, values.get(prop), errors, skip)
            continue
        f = _field(schema, name, prop, raw, values.get(prop, raw.get("default")), errors.get(name, ""))
        f.default = raw.get("default")
        out.append(f)
    return out


def subsection(schema: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema of a property that is a section always present (a bare `$ref` to a model with
    properties, as RolloutSpec.asynchronous), or None. A section that may be null (data.procedural,
    model.lora) stays one JSON field: an empty input is how it is left out."""
    if "$ref" not in raw:
        return None
    target = _resolve(schema, raw)
    return target if target.get("type") == "object" and target.get("properties") else None


def _section_fields(schema: dict[str, Any], section: dict[str, Any], raw: dict[str, Any], name: str, prop: str,
                    values: Any, errors: dict[str, str], skip: tuple[str, ...]) -> list[FormField]:  # fmt: skip
    """A section's fields, labelled under the section's name ("asynchronous › mode"); the first one's help
    opens with what the section is for (its model's docstring, else the property's description), said once
    where the section starts rather than repeated on each field."""
    fields = fields_for(schema, section, f"{name}.", values if isinstance(values, dict) else {}, errors, skip)
    title = prop.replace("_", " ")
    for f in fields:
        f.label = f"{title} › {f.label}"
    intro = one_line(section.get("description") or raw.get("description") or "")
    if fields and intro:
        fields[0].help = f"{intro} {fields[0].help}".strip()
    return fields


def one_line(text: str) -> str:
    """A docstring as one paragraph of help (its line breaks and indents as single spaces, backticks off)."""
    return re.sub(r"\s+", " ", text.replace("`", "")).strip()


def _field(schema, name: str, prop: str, raw: dict[str, Any], value: Any, error: str) -> FormField:
    options = [_resolve(schema, o) for o in raw.get("anyOf", [raw])]
    nullable = any(o.get("type") == "null" for o in options)
    main = next((o for o in options if o.get("type") != "null"), options[0])
    f = FormField(name=name, label=prop.replace("_", " "), widget="text", help=raw.get("description", ""),
                  value=value, nullable=nullable, error=error)  # fmt: skip
    kind = main.get("type")
    if "enum" in main or name in CATALOG_CHOICES:
        f.widget, f.kind = "select", "string"
        f.choices = ([""] if nullable else []) + [str(c) for c in main.get("enum", CATALOG_CHOICES.get(name, []))]
        f.choice_help = dict(CATALOGS.get(name, {}))
    elif kind in ("integer", "number"):
        f.widget, f.kind = "number", kind
        f.step = "1" if kind == "integer" else "any"
        f.minimum = main.get("minimum", main.get("exclusiveMinimum"))
        f.maximum = main.get("maximum", main.get("exclusiveMaximum"))
    elif kind == "boolean":
        f.widget, f.kind = "checkbox", "boolean"
    elif kind == "array" and main.get("items", {}).get("type") == "string":
        f.widget, f.kind = "textarea", "list"
    elif kind == "string":
        f.widget = "textarea" if multiline(prop, raw, main) or "\n" in str(value or "") else "text"
    else:
        f.widget, f.kind = "textarea", "json"
    examples = raw.get("examples") or main.get("examples")
    if examples:
        f.placeholder = display(f.kind, examples[0])
    return f


def multiline(prop: str, raw: dict[str, Any], main: dict[str, Any]) -> bool:
    """Whether a string setting is text of several lines (a prompt, code), edited in a textarea."""
    samples = [raw.get("default"), main.get("default"), *(raw.get("examples") or []), *(main.get("examples") or [])]
    return prop in MULTILINE_NAMES or prop.endswith("prompt") or any(isinstance(v, str) and "\n" in v for v in samples)


def read_fields(fields: list[FormField], post) -> tuple[dict[str, Any], dict[str, str]]:
    """Nested values from POST for these fields, and parse errors by field name."""
    out: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in fields:
        raw = post.get(f.name, "")
        try:
            value = _parse(f, raw, f.name in post)
        except ValueError as exc:
            errors[f.name] = str(exc)
            continue
        if value is _OMIT:
            continue
        _set(out, f.name.split("."), value)
    return out, errors


_OMIT = object()


def _parse(f: FormField, raw: str, present: bool) -> Any:
    if f.kind == "boolean":
        return present and raw not in ("", "0", "false", "off")
    if f.kind == "string" and f.widget == "textarea" and isinstance(raw, str):
        # Text of several lines is kept as typed (browsers send a textarea's line breaks as \r\n).
        text = raw.replace("\r\n", "\n").replace("\r", "\n")
        return text if text.strip() else (None if f.nullable else _OMIT)
    raw = raw.strip() if isinstance(raw, str) else raw
    if raw == "":
        return None if f.nullable else ([] if f.kind == "list" else _OMIT)
    if f.kind == "integer":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"must be a whole number, got {raw!r}") from None
    if f.kind == "number":
        try:
            number = float(raw)
        except ValueError:
            raise ValueError(f"must be a number, got {raw!r}") from None
        if not math.isfinite(number):  # float() reads "inf" and "nan": no JSON column stores them
            raise ValueError(f"must be a finite number, got {raw!r}")
        return number
    if f.kind == "list":
        return [line.strip() for line in raw.splitlines() if line.strip()]
    if f.kind == "json":
        try:
            return json_limits.loads(raw)
        except json_limits.JSONLimitError as exc:
            raise ValueError(str(exc)) from None
        except json.JSONDecodeError as exc:
            if f.shorthand is not None:
                return f.shorthand(raw)
            example = f" Example: {' '.join(f.placeholder.split())}" if f.placeholder else ""
            raise ValueError(f"not valid JSON: {exc}.{example}") from None
    return raw


def _set(target: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
