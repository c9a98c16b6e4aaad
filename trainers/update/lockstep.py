"""The rule that every process joins every collective, in one place.

Sharded (FSDP2), each forward pass all-gathers the parameters and each backward reduce-scatters the
gradients, over every process: a process that ran fewer passes than another would leave the others
waiting. So before a run of passes the processes agree on the most any of them needs (`idle_passes`),
and the ones with fewer add passes that change nothing (`idle_pass`). A process without data (every one
of its groups filtered out) runs idle passes only. Not sharded, there is nothing to agree on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainers.scale.distributed import DistInfo, max_over_processes
from trainers.update.batches import TokenBatch
from trainers.update.logprobs import token_logprobs
from trainers.update.precision import autocast


@dataclass(frozen=True)
class Lockstep:
    sharded: bool  # the model is sharded on a device mesh (its passes are collective)
    dist: DistInfo
    device: torch.device
    pad_id: int
    precision: str
    chunk_tokens: int  # the LM head's chunk (trainers.update.logprobs)
    pack_tokens: int  # the micro-batches' packing (trainers.update.micro_batching)

    def idle_passes(self, passes: int) -> int:
        """How many idle passes this process adds to its `passes` so that every process runs as many as the
        one with the most. Collective, asked before any of the passes (0 when not sharded)."""
        if not self.sharded:
            return 0
        return max_over_processes(passes, self.dist, self.device) - passes

    def idle_pass(self, model: torch.nn.Module, *, grad: bool) -> None:
        """A pass over a one-token sequence that changes nothing: with `grad` its backward runs with
        weight 0, so every parameter a real pass reaches gets a gradient of exactly zero (FSDP
        reduce-scatters the same gradients on every process) and the step's gradient is the real
        micro-batches' alone."""
        tokens = TokenBatch.build([[self.pad_id]], [[self.pad_id]], pad_id=self.pad_id, device=self.device)
        with torch.set_grad_enabled(grad), autocast(model, self.precision):
            logp, _ = token_logprobs(model, tokens, chunk_tokens=self.chunk_tokens, pack_tokens=self.pack_tokens)
        if grad:
            (logp.sum() * 0.0).backward()
