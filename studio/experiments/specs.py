"""Validate RunSpec configs with the trainer library's schema (the one source of truth)."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

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


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of base with overrides applied section by section (dicts merge, other values replace)."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
