"""Validate environment configs with the trainer library's schema (trainers.spec.EnvironmentSpec)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from studio.lib import json_limits
from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS
from trainers.spec import EnvironmentSpec, validation_errors


class ConfigError(ValueError):
    """A config the schema refuses; `errors` maps dotted field paths ("params.tools") to messages."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def validate_environment(config: Any) -> dict[str, Any]:
    """The validated, JSON-ready config (defaults filled in); ConfigError naming each bad field."""
    if not isinstance(config, dict):
        raise ConfigError({"__all__": "an environment config is an object: {kind, params, max_turns, ...}"})
    # The schema checks the kind inside a model validator, whose error has no field; name it here.
    kind = config.get("kind")
    if not isinstance(kind, str) or kind not in ENVIRONMENT_KINDS:
        raise ConfigError({"kind": f"unknown environment kind {kind!r}; known: {', '.join(ENVIRONMENT_KINDS.names())}"})
    try:
        checked = EnvironmentSpec.model_validate(config).model_dump(mode="json")
    except ValidationError as exc:
        raise ConfigError(validation_errors(exc)) from None
    if errors := json_limits.non_finite_errors(checked):
        raise ConfigError(errors)
    return checked
