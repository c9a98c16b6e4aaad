"""The one interface every environment kind implements, and what crosses it.

An environment is made per episode (`ENVIRONMENTS.get(kind)(params, limits, row_fields)`), so
it may hold that episode's state (a Python interpreter's variables, a game board):

    start = env.reset(row)          # the first messages, and fields the rubric compares against
    result = env.step(turn_text)    # after each model turn: observation, turn reward, done
    env.close()                     # always called, also after an error

`step` never raises for what the model did (a malformed tool call, a tool that raised, hung or
printed megabytes): those become observations with the reason, and the episode goes on. An
exception from `step` is a bug in the environment; the episode ends there, annotated.

Plain dataclasses, no torch, no Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from trainers.algorithms.registry import Registry

Message = dict[str, Any]  # {"role": "user" | "assistant" | "tool" | "system", "content": str, ...}


@dataclass(frozen=True)
class EpisodeLimits:
    """What one episode may use; from `EnvironmentSpec`."""

    max_turns: int = 4
    max_episode_tokens: int = 1024  # prompt excluded: sampled + observation tokens
    max_turn_tokens: int = 256
    tool_timeout_s: float = 5.0
    tool_memory_mb: int = 512
    max_observation_chars: int = 2000


@dataclass
class ToolCall:
    """One tool call parsed from a model turn, and what came of it. `error` is set when the call
    was malformed, the tool is unknown, or it raised, timed out, or was killed; `result` then
    holds what the model is shown (the error, truncated)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: str = ""
    error: str | None = None
    seconds: float = 0.0
    truncated: bool = False


@dataclass
class EnvironmentStart:
    """What `reset` returns: the episode's first messages (the prompt), and fields the rubric may
    compare against (a procedural task's answer), merged over the dataset row's fields."""

    messages: list[Message]
    fields: dict[str, Any] = field(default_factory=dict)
    state: str = ""  # a key naming the environment's state before the first turn (GiGPO)


@dataclass
class StepResult:
    """What follows one model turn. `observation` is empty when nothing is said back (the episode
    usually ends then). `state` names the environment's state after the turn: episodes of a group
    reaching the same state are grouped by GiGPO; "" when the kind has no such notion."""

    observation: list[Message] = field(default_factory=list)
    reward: float = 0.0
    reason: str = ""
    done: bool = False
    tool_calls: list[ToolCall] = field(default_factory=list)
    state: str = ""
    answered: bool = False  # the turn gave a final answer (rather than calling a tool)


class Environment:
    """Base class: subclasses set `params_model` and implement `reset` and `step`."""

    params_model: ClassVar[type[BaseModel]]

    def __init__(self, params: BaseModel, limits: EpisodeLimits) -> None:
        self.params = params
        self.limits = limits

    @classmethod
    def create(cls, params: dict[str, Any], limits: EpisodeLimits) -> Environment:
        return cls(cls.params_model.model_validate(params), limits)

    def reset(self, row: dict[str, Any]) -> EnvironmentStart:
        """`row` is the dataset row's fields with the prompt messages under "messages"."""
        raise NotImplementedError

    def step(self, text: str) -> StepResult:
        raise NotImplementedError

    def stop_strings(self) -> list[str]:
        """Strings that end a model turn besides EOS, kept in the turn's text (a Hermes tool call
        stops at `</tool_call>`, so the model waits for the result); none by default."""
        return []

    def close(self) -> None:
        """Release processes held for the episode (none by default)."""


# Environment kind -> class. Kinds register on import of `trainers.environments.kinds`.
ENVIRONMENTS: Registry[type[Environment]] = Registry("environment kind")
