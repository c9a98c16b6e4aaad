"""Validate RunSpec configs with the trainer library's schema (the one source of truth)."""

from __future__ import annotations

import copy
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from studio.lib import json_limits
from studio.lib.errors import FieldErrors
from trainers.spec import AsyncSpec, RunSpec, validation_errors


class SpecError(FieldErrors, ValueError):
    """A config the schema refuses; `errors` maps dotted field paths to messages (the API answers 400)."""


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """The validated, JSON-ready spec dict; raises SpecError naming each bad field."""
    try:
        spec = RunSpec.model_validate(config).model_dump(mode="json")
    except ValidationError as exc:
        raise SpecError(validation_errors(exc)) from None
    if errors := json_limits.non_finite_errors(spec):
        raise SpecError(errors)
    return spec


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


def asynchrony_note(spec: Any) -> str:
    """What a page says beside the settings of a run (or an experiment) whose generation runs ahead of
    training (rollout.asynchronous: `AsyncSpec.runs_ahead`, the trainer's own rule): that a rerun is not
    bit-identical, and why. "" for a synchronous spec (mode sync, or max_staleness 0: exact), or one whose
    asynchronous settings the schema would refuse (the page says that elsewhere)."""
    rollout = spec.get("rollout") if isinstance(spec, dict) else None
    settings = rollout.get("asynchronous") if isinstance(rollout, dict) else None
    if not isinstance(settings, dict):
        return ""
    try:
        asynchronous = AsyncSpec.model_validate(settings)
    except ValidationError:
        return ""
    if not asynchronous.runs_ahead:
        return ""
    n = asynchronous.max_staleness
    partial = (
        " Partial rollouts: a completion may be sampled by several versions." if asynchronous.partial_rollouts else ""
    )
    return (
        f"Asynchronous rollouts: generation runs ahead of training, so tokens may come from weights up to {n} "
        f"version{'s' if n != 1 else ''} older than those trained on. Faster, but not bit-reproducible: which "
        f"groups each step trains on depends on timing, so a rerun with the same seed can differ.{partial}"
    )
