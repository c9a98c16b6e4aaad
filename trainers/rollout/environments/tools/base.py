"""The interface every tool kind implements, and its registry.

A tool kind is configured once (its `params_model`, a pydantic model the studio renders as a
form) and made per episode, so it may hold that episode's state (a Python interpreter's
variables). It offers one or more functions, each described to the model by an OpenAI/Qwen-style
schema, `{"type": "function", "function": {"name", "description", "parameters"}}`, and answers

    tool.call(name, arguments) -> str | Clipped

An error the model should read (bad arguments, a traceback, a timeout) is raised as `ToolError`;
its message is what the model is shown. No torch, no Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel

from trainers.registry import Registry
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.catalog import ToolParams
from trainers.rollout.environments.signatures import function_schema

JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


@dataclass(frozen=True)
class Clipped:
    """A result a tool already cut (in the sandbox, so megabytes never cross the pipe): `text`
    is the kept start, `more` the number of characters dropped after it."""

    text: str
    more: int = 0


class ToolError(Exception):
    """The call failed; the episode goes on. The message is the short reason the episode's record
    keeps (`ToolCall.error`); `shown` is what the model reads, when more than that (a traceback
    after the cell's output)."""

    def __init__(self, message: str, shown: Clipped | None = None) -> None:
        super().__init__(message)
        self.shown = shown



class Tool:
    """Base class: subclasses set `params_model` and implement `schemas` and `call`."""

    params_model: ClassVar[type[ToolParams]]

    def __init__(self, params: BaseModel, limits: EpisodeLimits) -> None:
        self.params = params
        self.limits = limits

    @classmethod
    def create(cls, params: dict[str, Any], limits: EpisodeLimits) -> Tool:
        return cls(cls.params_model.model_validate(params), limits)

    def schemas(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def call(self, name: str, arguments: dict[str, Any]) -> str | Clipped:
        raise NotImplementedError

    def close(self) -> None:
        """Release processes held for the episode (none by default)."""


class FunctionTool(Tool):
    """A tool offering one function described by class attributes; subclasses implement `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema(self.name, self.description, self.parameters)]

    def call(self, name: str, arguments: dict[str, Any]) -> str | Clipped:
        check_arguments(self.parameters, arguments)
        return self.run(arguments)

    def run(self, arguments: dict[str, Any]) -> str | Clipped:
        raise NotImplementedError



def check_arguments(parameters: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Refuse (ToolError) missing, unknown or mistyped arguments, so the model learns what it
    got wrong rather than reading a traceback from deep inside the tool."""
    properties = parameters.get("properties", {})
    missing = [p for p in parameters.get("required", []) if p not in arguments]
    if missing:
        raise ToolError(f"missing argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
    unknown = [a for a in arguments if a not in properties]
    if unknown:
        raise ToolError(f"unknown argument {unknown[0]!r}; expected: {', '.join(properties) or 'none'}")
    for key, value in arguments.items():
        expected = properties[key].get("type")
        types = JSON_TYPES.get(expected, (object,))
        # bool is an int in Python, but not a JSON number
        if not isinstance(value, types) or (isinstance(value, bool) and expected in ("integer", "number")):
            raise ToolError(f"argument {key!r} must be {expected}, got {type(value).__name__}")


# Tool kind -> class. Kinds register on import of `trainers.rollout.environments.tools`.
TOOLS: Registry[type[Tool]] = Registry("tool kind")
