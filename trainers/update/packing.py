"""Sequences packed end to end into rows, so a forward pass computes no padding.

A padded micro-batch of skewed completions pays for its longest row in every row. Packing
instead concatenates each sequence's real tokens ([prompt | completion], no padding) into rows
of at most a token budget; position ids restart at 0 at each sequence, and with no 2-D
attention mask transformers' masking_utils reads those restarts as sequence boundaries and
builds a block-diagonal causal mask (sdpa/eager/flex; flash-attention uses the varlen path).
`PackedRows.source` then gathers the hidden states that predict each completion token back
into the (B, T) layout the loss expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from trainers.update.batches import TokenBatch


def first_fit_decreasing(lengths: list[int], capacity: int) -> list[list[int]]:
    """Indices of `lengths` grouped into bins whose lengths sum to at most `capacity`, longest
    first, each into the first bin it fits; an item longer than `capacity` gets a bin of its own.
    Every index appears once. Bins keep their items in the order they were placed."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        n = lengths[i]
        slot = next((k for k, free in enumerate(room) if n <= free), None)
        if slot is None:
            bins.append([i])
            room.append(capacity - n)
        else:
            bins[slot].append(i)
            room[slot] -= n
    return bins


@dataclass
class PackedRows:
    """B sequences laid end to end in R rows of L columns.

    `source[b, t]` is the flat index (row * L + column) of the position whose hidden state
    predicts completion token t of sequence b (0 past the sequence's end: masked by the caller)."""

    input_ids: torch.Tensor  # (R, L)
    position_ids: torch.Tensor  # (R, L) restart at 0 per sequence; tail padding is a sequence of its own
    source: torch.Tensor  # (B, T)

    @classmethod
    def build(cls, batch: TokenBatch, *, row_tokens: int) -> PackedRows:
        """Pack the real tokens of a [left-padded prompt | right-padded completion] batch."""
        B, T = batch.completion_mask.shape
        P = batch.prompt_len
        prompt_lens = batch.attention_mask[:, :P].sum(-1).tolist()
        completion_lens = batch.completion_mask.sum(-1).long().tolist()
        if any(n == 0 for n in prompt_lens):
            raise ValueError("packing needs a prompt token before each completion (it predicts the first one)")
        lengths = [p + c for p, c in zip(prompt_lens, completion_lens, strict=True)]
        rows = first_fit_decreasing(lengths, row_tokens)
        L = max(sum(lengths[i] for i in row) for row in rows)
        ids = torch.zeros((len(rows), L), dtype=torch.long)  # the tail's ids are never read: any id will do
        positions = torch.zeros((len(rows), L), dtype=torch.long)
        source = torch.zeros((B, T), dtype=torch.long)
        tokens = batch.input_ids.cpu()
        for r, row in enumerate(rows):
            start = 0
            for i in row:
                p, n = prompt_lens[i], lengths[i]
                ids[r, start : start + n] = tokens[i, P - p : P - p + n]
                positions[r, start : start + n] = torch.arange(n)
                c = n - p
                # The position before completion token t (the last prompt token for t = 0) predicts it.
                source[i, :c] = r * L + start + p - 1 + torch.arange(c)
                start += n
            positions[r, start:] = torch.arange(L - start)
        device = batch.input_ids.device
        return cls(ids.to(device), positions.to(device), source.to(device))

    def gather(self, hidden: torch.Tensor) -> torch.Tensor:
        """(R, L, H) hidden states of the packed rows -> (B, T, H) in completion layout."""
        flat = hidden.reshape(-1, hidden.shape[-1])  # (R*L, H)
        return flat[self.source]  # (B, T, H)
