"""The optimiser and the update step: learning rate, batches, micro-batching, precision."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainers.spec.base import Section

# Both chosen by measurement (bench/logprob_memory.py; table in bench/README.md). One forward +
# backward of 8 x 512 completion tokens at a 151,936 vocabulary, hidden 512, float32: whole logits
# added 12.5 GiB and 44.7 s CPU, chunks of 1,024 tokens (594 MiB of logits) 4.1 GiB and 53.1 s (the
# head's forward runs again in the backward), 512 tokens 2.8 GiB and 53.1 s, 256 tokens 2.0 GiB and
# 51.3 s, 220 tokens 1.8 GiB and 45.2 s (1 thread): below ~1,000 tokens per chunk time stops growing, so the budget is set in logits bytes,
# which sizes the chunk by the vocabulary: 128 MiB is 220 tokens at 151,936, 262 at Llama 3's
# 128,256, and a tiny vocabulary's whole micro-batch (768 entries: 43,690 tokens), computed as before.
# bfloat16 autocast took 31-27 % less CPU than float32 at that shape (whole / chunked), none at the
# tiny model's (0.09 vs 0.10 s), and moves logprobs by up to 0.004 (mean 0.001) from the float32
# ones the engine samples with, widening the sampler / trainer gap: float32 stays the default,
# bfloat16 is the choice for large vocabularies.
LOGPROB_CHUNK_MIB = 128


LOGPROB_CHUNK_HELP = (
    "MiB of float32 logits that exist at once when computing logprobs and entropy: the LM head runs "
    "over as many completion tokens at a time as fit (MiB / (vocabulary x 4 bytes)), and with "
    "gradients recomputes each chunk in the backward pass instead of keeping it. 0 computes the "
    "micro-batch's whole logits at once. 128 MiB is 220 tokens at a 151,936-token vocabulary, where "
    "it cut one 8 x 512-token forward + backward's memory from 12.5 to 1.8 GiB; a small vocabulary's "
    "micro-batch stays one chunk."
)


PRECISION = "float32"


PRECISION_HELP = (
    "Arithmetic of the trainer's forward and backward passes. bfloat16 runs them under autocast "
    "(weights stay in the model's dtype; logprobs, ratios and the loss stay float32): about 30 % "
    "faster at a 151,936-token vocabulary on a CPU with AVX512-BF16, no faster on tiny models, "
    "and logprobs within 0.02 of float32's (loss within 2e-3 on the test batch)."
)


class OptimSpec(Section):
    """Optimisation: learning rate and schedule, batch sizes, steps, gradient clipping, seed."""

    lr: float = Field(1e-6, gt=0, le=1, description="Peak learning rate (AdamW).")
    weight_decay: float = Field(0.0, ge=0, le=1, description="AdamW weight decay.")
    beta1: float = Field(0.9, ge=0, lt=1, description="AdamW beta1.")
    beta2: float = Field(0.999, ge=0, lt=1, description="AdamW beta2.")
    lr_scheduler: Literal["constant", "linear", "cosine"] = Field("constant", description="Schedule after warm-up.")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps.")
    max_grad_norm: float | None = Field(1.0, gt=0, description="Gradient clipping; empty disables.")
    prompts_per_step: int = Field(
        8,
        ge=1,
        le=65536,
        description="Prompts per step; rollouts = prompts x group_size under the fixed budget (curriculum.budget "
        "sets others).",
    )
    micro_batch_size: int = Field(
        8, ge=1, description="Sequences per forward/backward with 'padded' micro-batching; the rest is accumulated."
    )
    # Defaults by measurement (bench/micro_batching.py and its README section: this 2-core CPU, hidden
    # 512, 32 completions of 16-512 tokens): balanced@2048 within 4 % of padded (noise: the same tokens
    # computed), balanced@4096 15 % slower on spread lengths (wider passes, more padding), packed 1.3-2.1x
    # slower (CPU sdpa computes a packed row's whole masked L x L attention, and each sequence carries its
    # own prompt). Packing is meant for flash-attention's varlen path on a GPU (not measured here).
    micro_batching: Literal["padded", "balanced", "packed"] = Field(
        "padded",
        description="How sequences are grouped into forward/backward passes. padded: micro_batch_size sequences "
        "of similar length each (fastest on CPU); balanced: sequences of similar length up to micro_batch_tokens "
        "(padding included), so short ones share a pass and a pass's memory is bounded; packed: sequences laid "
        "end to end in rows of up to micro_batch_tokens, no padding computed (for GPUs with flash-attention). "
        "Same gradient whichever you choose; only speed and memory differ.",
    )
    micro_batch_tokens: int = Field(
        2048,
        ge=16,
        le=1_048_576,
        description="Tokens (prompt + completion) per forward/backward with 'balanced' or 'packed' "
        "micro-batching; a longer sequence gets a pass of its own.",
    )
    total_steps: int = Field(100, ge=1, le=10_000_000, description="Optimiser steps to run.")
    seed: int = Field(0, ge=0, description="Seeds data order, sampling and initialisation.")
    logprob_chunk_mib: float = Field(LOGPROB_CHUNK_MIB, ge=0, le=1_048_576, description=LOGPROB_CHUNK_HELP)
    precision: Literal["float32", "bfloat16"] = Field(PRECISION, description=PRECISION_HELP)
