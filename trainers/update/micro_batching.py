"""How a step's sequences are split into micro-batches (one forward/backward each).

Three ways, named by `OptimSpec.micro_batching`:
- "padded": `size` sequences each, sorted by completion length, so a micro-batch of short
  completions pays little padding (`TokenBatch.select` trims the columns nobody uses);
- "balanced": sorted the same way, but filled up to a budget of `tokens` (rows x padded width),
  so a micro-batch of short completions holds more of them and the step makes fewer passes;
- "packed": first-fit decreasing bins of at most `tokens` real tokens, each bin run as one row of
  sequences laid end to end (`trainers.update.packing`): no padding computed at all.
Every row appears in exactly one micro-batch; the loop weights each micro-batch's loss by its
share of the aggregation units, so any partition gives the same gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from trainers.update.packing import first_fit_decreasing

if TYPE_CHECKING:
    from trainers.update.batches import TokenBatch

MODES = ("padded", "balanced", "packed")


def by_count(batch: TokenBatch, size: int) -> list[torch.Tensor]:
    """Row indices of micro-batches of at most `size` sequences, grouped by completion length
    so that `select` trims most of the padding (completions that stop early at EOS do not pay
    for the longest one)."""
    lengths = batch.completion_mask.sum(-1)  # (B,)
    order = torch.argsort(lengths, stable=True)
    return list(torch.split(order, size))


def by_padded_tokens(batch: TokenBatch, tokens: int) -> list[torch.Tensor]:
    """Rows sorted by completion length, cut where one more row would make the micro-batch's
    padded size (rows x (longest prompt + longest completion)) exceed `tokens`; a row longer
    than `tokens` alone is a micro-batch of its own."""
    P = batch.prompt_len
    prompt_lens = batch.attention_mask[:, :P].sum(-1).tolist()
    completion_lens = batch.completion_mask.sum(-1).long().tolist()
    order = torch.argsort(batch.completion_mask.sum(-1), stable=True).tolist()
    parts: list[list[int]] = []
    widest_prompt = widest_completion = 0
    for i in order:
        p, c = max(widest_prompt, prompt_lens[i]), max(widest_completion, completion_lens[i])
        if parts and (len(parts[-1]) + 1) * (p + c) <= tokens:
            parts[-1].append(i)
            widest_prompt, widest_completion = p, c
        else:
            parts.append([i])
            widest_prompt, widest_completion = prompt_lens[i], completion_lens[i]
    return [torch.tensor(part, device=batch.input_ids.device) for part in parts]


def by_packed_tokens(batch: TokenBatch, tokens: int) -> list[torch.Tensor]:
    """Bins of sequences whose real tokens (prompt + completion) sum to at most `tokens`, filled
    longest first; each bin packs into one row (see `trainers.update.packing.PackedRows`)."""
    lengths = (batch.attention_mask.sum(-1)).tolist()
    bins = first_fit_decreasing(lengths, tokens)
    return [torch.tensor(sorted(rows), device=batch.input_ids.device) for rows in bins]


@dataclass(frozen=True)
class MicroBatching:
    """One of `MODES`, with its size: `size` sequences ("padded") or `tokens` tokens (the others)."""

    mode: str = "padded"
    size: int = 8
    tokens: int = 2048

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown micro-batching {self.mode!r}; valid: {', '.join(MODES)}")

    @classmethod
    def of(cls, optim) -> MicroBatching:
        """From an `OptimSpec`."""
        return cls(optim.micro_batching, optim.micro_batch_size, optim.micro_batch_tokens)

    @property
    def pack_tokens(self) -> int:
        """The row budget `token_logprobs` packs a micro-batch into; 0: the padded layout."""
        return self.tokens if self.mode == "packed" else 0

    def split(self, batch: TokenBatch) -> list[torch.Tensor]:
        """Row indices of each micro-batch; every row of `batch` appears once."""
        if self.mode == "padded":
            return by_count(batch, self.size)
        if self.mode == "balanced":
            return by_padded_tokens(batch, self.tokens)
        return by_packed_tokens(batch, self.tokens)
