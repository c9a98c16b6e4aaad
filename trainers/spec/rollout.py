"""Sampling: the rollout engine and its options, and the multi-turn environment an episode runs in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from trainers.access import ENDPOINT, marks
from trainers.rollout.environments.catalog import environment_params
from trainers.spec.base import Section, located


class AsyncSpec(Section):
    """Asynchronous rollouts: generation runs ahead of training, so neither waits for the other.

    Asynchrony trades exact reproducibility for throughput: the engine samples with weights up to
    `max_staleness` updates older than those trained, which rollouts finish first depends on timing,
    and a rerun with the same seed is not bit-identical. Synchronous (mode sync, or max_staleness 0)
    stays exact. Pair it with an off-policy correction (algorithm.correction, e.g. 'decoupled')."""

    mode: Literal["sync", "async"] = Field(
        "sync",
        description="sync: generate, score, then train, every step in turn (exact, reproducible). async: a "
        "generator thread samples and scores groups into a queue while the trainer trains on earlier ones "
        "(faster; tokens may come from older weights, and a rerun is not bit-identical). One process. On one GPU "
        "the generator (transformers, or colocated vLLM) time-shares the device with training; with the vLLM "
        "server on a device of its own, generation truly overlaps training.",
    )
    max_staleness: int = Field(
        1, ge=0, le=64,
        description="async: the most policy versions (optimiser updates) between the weights that sampled a token "
        "and those it is trained from; groups holding an older token are dropped, and counted "
        "(async/dropped_stale). 0 is the synchronous step.",
    )  # fmt: skip
    partial_rollouts: bool = Field(
        False,
        description="async: sample in segments of segment_tokens; new weights reach the engine between segments, "
        "and completions unfinished when a step has its groups go on with the new weights (each token records "
        "the version that sampled it, and its own logprob). Transformers engine, single-turn runs without stop "
        "strings.",
    )
    segment_tokens: int = Field(
        16, ge=1, le=131072,
        description="Partial rollouts: tokens each completion samples per engine request; smaller lets new weights "
        "in sooner, larger batches better.",
    )  # fmt: skip
    over_provision: float = Field(
        1.0, ge=1, le=8,
        description="Partial rollouts: groups kept in flight, as a multiple of optim.prompts_per_step; above 1 the "
        "step takes the groups that finish first and the long ones carry over (fewer steps wait on the longest "
        "completion, but short completions are over-represented early on).",
    )  # fmt: skip

    @property
    def runs_ahead(self) -> bool:
        """Whether generation runs in its own thread: async with some staleness allowed (0 is the sync step)."""
        return self.mode == "async" and self.max_staleness > 0


class RolloutSpec(Section):
    """Generation: engine, sampling parameters and response length."""

    engine: Literal["transformers", "vllm"] = Field("transformers", description="Generation back-end.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = Field(
        None,
        description="Colocated vLLM: the dtype it samples in; empty: model.dtype. Training keeps model.dtype, so "
        "bfloat16 here samples faster where the device computes bfloat16 natively (GPUs from Ampere on, CPUs with "
        "AVX512-BF16 or AMX) while updates stay float32; elsewhere it is slower. auto: bfloat16 on such a device, "
        "model.dtype on others (decided where the run starts). The sampler then differs a little from the policy "
        "trained (rollout/logprob_gap): pair it with an off-policy correction (algorithm.correction, e.g. 'tis'). "
        "The transformers engine samples with the trained model, in its dtype.",
    )
    max_new_tokens: int = Field(
        64, ge=1, le=131072,
        description="Tokens the model may sample in one turn: the whole completion without an environment; in an "
        "environment each turn, as well as the environment's max_turn_tokens (the smaller wins).",
    )  # fmt: skip
    temperature: float = Field(1.0, ge=0, le=5, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling.")
    top_k: int = Field(0, ge=0, description="Top-k sampling; 0 disables.")
    stop: list[str] = Field(default_factory=list, description="Stop strings (besides EOS).")
    generation_batch_size: int = Field(64, ge=1, description="Sequences generated per engine call.")
    cuda_graphs: bool = Field(
        True,
        description="Transformers engine on a CUDA device: decode on a fixed-shape KV cache by replaying CUDA graphs "
        "(captured once per batch-size bucket, kept across training steps), so a small model's decode step is not "
        "bound by kernel launches. Off: every decode step runs eagerly. No effect on the CPU, which has no graphs.",
    )
    vllm_gpu_memory_utilization: float = Field(
        0.3,
        gt=0,
        le=0.95,
        description="vLLM: fraction of GPU memory it may hold (on the CPU build: at most this "
        "fraction of host memory for its KV cache, sized to one rollout batch).",
    )
    vllm_sleep_during_update: bool = Field(
        True,
        description="vLLM colocated: release memory during the update (GPU only; the CPU build has no sleep). Mode "
        "sync only: an asynchronous run generates while it trains, so vLLM stays awake.",
    )
    vllm_enforce_eager: bool = Field(
        False, description="vLLM: no graph compilation (torch.compile, CUDA graphs): starts in seconds, samples slower."
    )
    vllm_server_url: str | None = Field(
        None,
        description="vLLM: use a separate server instead of colocating (its host must be on the operator's list of "
        "endpoints: the policy's weights and the prompts are sent there).",
        json_schema_extra=marks(ENDPOINT),
    )
    asynchronous: AsyncSpec = Field(
        default_factory=AsyncSpec,
        description="Generation running ahead of training (throughput) or in lockstep with it (exact).",
    )


class EnvironmentSpec(Section):
    """What the model acts in over several turns; none means one turn and done."""

    kind: str = Field(..., description="Environment kind; see trainers.rollout.environments.kinds.")
    params: dict[str, Any] = Field(default_factory=dict, description="Kind-specific parameters.")
    max_turns: int = Field(4, ge=1, le=256, description="Model turns per episode; the episode ends after the last.")
    max_episode_tokens: int = Field(
        1024, ge=8, le=131072,
        description="Tokens after the prompt (sampled + observation) before the episode ends: what one rollout "
        "holds beyond its prompt.",
    )  # fmt: skip
    max_turn_tokens: int = Field(
        256, ge=1, le=131072,
        description="Tokens the model may sample in one turn; an experiment's rollout.max_new_tokens caps each "
        "turn too (the smaller wins).",
    )  # fmt: skip
    tool_timeout_s: float = Field(5.0, gt=0, le=600, description="Wall-clock limit of one tool call.")
    tool_memory_mb: int = Field(512, ge=32, le=65536, description="Memory limit of a sandboxed tool or environment.")
    max_observation_chars: int = Field(
        2000, ge=16, le=1_000_000, description="Longer tool results are cut, with a note saying so."
    )

    @model_validator(mode="after")
    def _params_match_kind(self) -> EnvironmentSpec:
        model = environment_params(self.kind)  # UnknownNameError (a ValueError) lists the kinds
        try:
            self.__dict__["params"] = model.model_validate(self.params).model_dump()
        except ValidationError as exc:
            raise located(exc, "params") from None
        return self

    def params_section(self) -> BaseModel:
        """The params as the kind's model (trainers.access finds the paths they name)."""
        return environment_params(self.kind).model_validate(self.params)


@dataclass(frozen=True)
class TokenBounds:
    """How long a rollout may be, in tokens (see `token_bounds`)."""

    turn: int  # sampled in one model turn
    sampled: int  # sampled in the whole rollout (every turn): what is generated
    after_prompt: int  # the rollout beyond its prompt (sampled + observations): what is trained on with the prompt


def token_bounds(max_new_tokens: int, max_turns: int | None = None, max_turn_tokens: int | None = None,
                 max_episode_tokens: int | None = None) -> TokenBounds:  # fmt: skip
    """The one rule for token limits. Without an environment (max_turns None) a rollout is one turn of
    at most rollout.max_new_tokens. In an environment each turn samples at most
    min(rollout.max_new_tokens, environment.max_turn_tokens), and the episode holds at most
    environment.max_episode_tokens after the prompt (sampled and observation tokens; the last turn is
    cut to what is left), so it samples at most min(max_turns x turn, max_episode_tokens). The engines
    (trainers.rollout.generate), the trainer and the studio's step cost all read it from here."""
    if max_turns is None:
        return TokenBounds(max_new_tokens, max_new_tokens, max_new_tokens)
    turn = min(max_new_tokens, max_turn_tokens or max_new_tokens)
    sampled = min(max_turns * turn, max_episode_tokens or max_turns * turn)
    # One turn: nothing follows it. More: observations between turns may fill the episode's budget.
    after_prompt = sampled if max_turns == 1 else max(sampled, max_episode_tokens or sampled)
    return TokenBounds(turn, sampled, after_prompt)
