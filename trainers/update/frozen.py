"""Step 5 of the algorithm: logprobs without gradient (the old policy's, the reference's), in the
same micro-batches as training, each process joining the others' passes (`Lockstep`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainers.update.batches import TokenBatch
from trainers.update.lockstep import Lockstep
from trainers.update.logprobs import batched_logprobs
from trainers.update.micro_batching import MicroBatching
from trainers.update.precision import autocast


@dataclass(frozen=True)
class FrozenLogprobs:
    micro_batching: MicroBatching
    lockstep: Lockstep
    temperature: float  # the sampling temperature the logits are divided by

    def __call__(
        self, model: torch.nn.Module, batch: TokenBatch | None, with_entropy: bool = False
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(B, T) logprobs of the completion tokens and, `with_entropy`, the (B, T) entropy at each
        completion position; (None, None) without a batch. Sharded, every process runs as many passes as
        the process with the most micro-batches (idle passes for the rest), a process without a batch
        included."""
        lockstep = self.lockstep
        idle = lockstep.idle_passes(len(self.micro_batching.split(batch)) if batch is not None else 0)
        logp = entropy = None
        with autocast(model, lockstep.precision):
            if batch is not None:
                logp, entropy = batched_logprobs(
                    model,
                    batch,
                    micro_batching=self.micro_batching,
                    temperature=self.temperature,
                    with_entropy=with_entropy,
                    chunk_tokens=lockstep.chunk_tokens,
                )
            for _ in range(idle):
                lockstep.idle_pass(model, grad=False)
        return logp, entropy
