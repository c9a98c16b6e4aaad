"""`TokenBatch`: prompts and completions laid out as tensors, the unit every update stage takes."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TokenBatch:
    """Prompts + completions as tensors. Shapes: B sequences, P prompt columns, T completion columns."""

    input_ids: torch.Tensor  # (B, P+T)
    attention_mask: torch.Tensor  # (B, P+T) 1 on real tokens
    completion_mask: torch.Tensor  # (B, T) float, 1 on completion tokens

    @property
    def prompt_len(self) -> int:
        return self.input_ids.shape[1] - self.completion_mask.shape[1]

    @property
    def completion_ids(self) -> torch.Tensor:  # (B, T)
        return self.input_ids[:, self.prompt_len :]

    @classmethod
    def build(
        cls, prompts: list[list[int]], completions: list[list[int]], *, pad_id: int, device: torch.device | str = "cpu"
    ) -> TokenBatch:
        B = len(prompts)
        P = max(len(p) for p in prompts)
        T = max(1, max(len(c) for c in completions))
        ids = torch.full((B, P + T), pad_id, dtype=torch.long)
        attn = torch.zeros((B, P + T), dtype=torch.long)
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            ids[i, P - len(p) : P] = torch.tensor(p, dtype=torch.long)
            ids[i, P : P + len(c)] = torch.tensor(c, dtype=torch.long)
            attn[i, P - len(p) : P + len(c)] = 1
        mask = attn[:, P:].float()
        return cls(ids.to(device), attn.to(device), mask.to(device))

    def select(self, index: slice | torch.Tensor) -> TokenBatch:
        """Rows `index`, with columns that are padding in every selected row trimmed away."""
        ids, attn, mask = self.input_ids[index], self.attention_mask[index], self.completion_mask[index]
        P = self.prompt_len
        first = int(attn[:, :P].any(0).nonzero()[0]) if attn[:, :P].any() else P
        real = mask.any(0).nonzero()
        T = int(real[-1]) + 1 if len(real) else 1
        return TokenBatch(ids[:, first : P + T], attn[:, first : P + T], mask[:, :T])
