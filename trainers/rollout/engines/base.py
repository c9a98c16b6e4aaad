"""The rollout-engine interface: prompts (token ids) in; completions, their token ids,
sampled-token logprobs and finish reasons out.

Engines are picked by `spec.rollout.engine` through `catalog.create_engine`, which imports the
engine module only when it is used. An engine class is constructed as `Engine(spec, model=policy, tokenizer=tokenizer)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from trainers.spec import RunSpec

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 64
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    stop: list[str] = field(default_factory=list)
    logprobs: bool = False  # return the logprob of each sampled token
    # Keep the stop string that ended a completion at the end of its text (a tool call's
    # `</tool_call>`); its tokens are in `token_ids` either way.
    include_stop_in_text: bool = False

    @classmethod
    def from_spec(cls, spec: RunSpec, *, logprobs: bool = False) -> SamplingParams:
        r = spec.rollout
        return cls(r.max_new_tokens, r.temperature, r.top_p, r.top_k, list(r.stop), logprobs)


@dataclass
class Generation:
    """One completion. `token_ids` include the EOS token when the model emitted one;
    `text` is decoded without special tokens and cut before a stop string (after it with
    `SamplingParams.include_stop_in_text`)."""

    token_ids: list[int]
    text: str
    logprobs: list[float] | None
    finish_reason: FinishReason


class RolloutEngine:
    """Base class with no-op hooks; subclasses override `generate` and what else they need."""

    # True for an engine that generates with the model object it is given (transformers). A model
    # sharded over processes cannot generate on one process alone, so such an engine is then given
    # a whole copy of the policy (trainers.run.loop), which the loop refreshes after each update.
    samples_from_model: ClassVar[bool] = False
    # Called between two sampled tokens (and between batches) by an engine that samples token by token
    # (transformers): a stop asked for during a step raises from it (trainers.run.stopping). None: never.
    between_tokens: Callable[[], None] | None = None
    # Called with how many completions just finished, by an engine that can tell (transformers: rows of
    # its decode loop as they end, a generate() batch as it returns): how far a long sampling is
    # (trainers.rollout.progress). None: never.
    completed: Callable[[int], None] | None = None
    # Called with (t, max_new_tokens) as a batch samples its t-th token, by an engine that samples token by
    # token (transformers' decode loop): how far a batch whose rows all run to the length limit is. None: never.
    decoding: Callable[[int, int], None] | None = None

    def generate(self, prompt_token_ids: list[list[int]], n: int, params: SamplingParams) -> list[list[Generation]]:
        """n completions for each prompt: result[i][j] is sample j of prompt i."""
        raise NotImplementedError

    def update_weights(self, model: Any) -> None:
        """Make the engine sample from `model`'s current weights (a copy engine such as vLLM
        must sync them; an engine that samples from the policy object itself needs nothing).
        Every process calls it after each update: for a sharded model (trainers.scale.sharding) the
        weights must be gathered now, together, not when this process next generates."""

    def sync_weights(self) -> None:
        """Take the weights of the model last given to `update_weights` now, if the engine would
        otherwise read them at its next generation (vLLM pushes lazily). The asynchronous pipeline
        calls it between the generator's requests: by the next one the trainer is changing them."""

    def state_dict(self) -> dict[str, Any]:
        """Random state the engine keeps outside torch's global generator (for resume)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""

    def close(self) -> None:
        """Release memory, processes, servers."""


class EngineUnavailable(RuntimeError):
    """The engine named in the spec cannot run here (module or dependency missing)."""
