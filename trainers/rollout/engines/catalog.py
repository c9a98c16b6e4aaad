"""The rollout engines by name: `spec.rollout.engine` picks one through `create_engine`.

Each entry is a function importing the engine's class, so an engine's module (and any library it
imports at the top, as an engine for another serving stack would) loads only when a run picks it:
a missing library makes that one engine unavailable, with the reason, and never breaks the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainers.registry import Registry
from trainers.rollout.engines.base import EngineUnavailable, RolloutEngine
from trainers.spec import RunSpec

# Engine name -> a function importing its class: an engine's module (vLLM's) loads only when used.
ENGINES: Registry[Callable[[], type[RolloutEngine]]] = Registry("rollout engine")


@ENGINES.register("transformers")
def _transformers_engine() -> type[RolloutEngine]:
    from trainers.rollout.engines.hf import HFEngine  # loaded when picked (see the module's docstring)

    return HFEngine


@ENGINES.register("vllm")
def _vllm_engine() -> type[RolloutEngine]:
    from trainers.rollout.engines.vllm_engine import VLLMEngine  # loaded when picked

    return VLLMEngine


def engine_class(name: str) -> type[RolloutEngine]:
    load = ENGINES.get(name)  # UnknownNameError (a ValueError) naming the valid engines
    try:
        return load()
    except ModuleNotFoundError as exc:
        raise EngineUnavailable(
            f"rollout engine {name!r} is not available here: {exc}. "
            "Use rollout.engine='transformers', or install what it needs."
        ) from exc


def create_engine(spec: RunSpec, *, model: Any, tokenizer: Any) -> RolloutEngine:
    return engine_class(spec.rollout.engine)(spec, model=model, tokenizer=tokenizer)
