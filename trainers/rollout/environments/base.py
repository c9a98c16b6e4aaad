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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from trainers.episodes import Message, ToolCall
from trainers.registry import Registry
from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS, EnvironmentKind
from trainers.spec import EnvironmentSpec


@dataclass(frozen=True)
class EpisodeLimits:
    """What one episode may use; from `EnvironmentSpec`."""

    max_turns: int = 4
    max_episode_tokens: int = 1024  # prompt excluded: sampled + observation tokens
    max_turn_tokens: int = 256
    tool_timeout_s: float = 5.0
    tool_memory_mb: int = 512
    max_observation_chars: int = 2000

    @classmethod
    def of(cls, spec: EnvironmentSpec) -> EpisodeLimits:
        """The limits an environment's settings set."""
        return cls(
            max_turns=spec.max_turns,
            max_episode_tokens=spec.max_episode_tokens,
            max_turn_tokens=spec.max_turn_tokens,
            tool_timeout_s=spec.tool_timeout_s,
            tool_memory_mb=spec.tool_memory_mb,
            max_observation_chars=spec.max_observation_chars,
        )


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


class EnvironmentRegistry(Registry[type[Environment]]):
    """Environment kind -> class. A kind the catalogue does not list (one defined outside this
    package, as a test's or a plugin's) enters the catalogue too, with its class's docstring and
    `params_model`, so settings naming it validate; a built-in kind must use the catalogue's model."""

    def register(self, name: str) -> Callable[[type[Environment]], type[Environment]]:
        add = super().register(name)

        def add_with_settings(cls: type[Environment]) -> type[Environment]:
            if name not in ENVIRONMENT_KINDS:
                ENVIRONMENT_KINDS.register(name)(EnvironmentKind((cls.__doc__ or "").strip(), cls.params_model))
            elif ENVIRONMENT_KINDS.get(name).params_model is not cls.params_model:
                raise ValueError(f"environment kind {name!r}: its params_model is not the catalogue's")
            return add(cls)

        return add_with_settings


# Kinds register on import of `trainers.rollout.environments.kinds`.
ENVIRONMENTS = EnvironmentRegistry("environment kind")
