"""Validate RunSpec configs with the trainer library's schema (the one source of truth)."""

from __future__ import annotations

import copy
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from trainers.spec import RunSpec, validation_errors


class SpecError(ValueError):
    """A config the schema refuses; `errors` maps dotted field paths to messages."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """The validated, JSON-ready spec dict; raises SpecError naming each bad field."""
    try:
        return RunSpec.model_validate(config).model_dump(mode="json")
    except ValidationError as exc:
        raise SpecError(validation_errors(exc)) from None


def _sections() -> dict[str, bool]:
    """{RunSpec section name: whether null is allowed} for each section that is a group of settings."""
    out = {}
    for name, field in RunSpec.model_fields.items():
        kinds = typing.get_args(field.annotation) or (field.annotation,)
        if any(isinstance(kind, type) and issubclass(kind, BaseModel) for kind in kinds):
            out[name] = type(None) in kinds
    return out


SECTIONS = _sections()


def section_errors(config: Any) -> dict[str, str]:
    """{field: why} for a config that is not an object, or whose sections (model, data, algorithm...)
    are not objects: what the studio must know before it reads or merges a config, which the schema
    alone checks only after. {} when the shape is right (the values are the schema's to check)."""
    if not isinstance(config, dict):
        return {"non_field_errors": f"must be an object of RunSpec sections, got {json_type(config)}"}
    errors = {}
    for name, nullable in SECTIONS.items():
        value = config.get(name)
        if name in config and not isinstance(value, dict) and not (value is None and nullable):
            errors[name] = f"must be an object of {name} settings, got {json_type(value)}"
    return errors


def json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "a number",
             float: "a number", type(None): "null"}  # fmt: skip
    return names.get(type(value), type(value).__name__)


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of base with overrides applied section by section (dicts merge, other values replace)."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
