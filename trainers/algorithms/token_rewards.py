"""Sequence rewards -> the per-token rewards every advantage estimator reads.

The rubric gives one reward per completion (an outcome reward). It is placed on the
completion's last valid token, and with `kl_in_reward` every valid token also gets
-beta * KL(t) (the KL penalty as a reward, as in InstructGPT / verl's `apply_kl_penalty`),
so a return-based estimator (REINFORCE++) charges each token the KL of what follows it.
"""

from __future__ import annotations

import torch
from torch import Tensor


@torch.no_grad()
def token_level_rewards(rewards: Tensor, mask: Tensor, kl: Tensor | None = None, beta: float = 0.0) -> Tensor:
    """(B, T) r_t: the sequence reward on the last valid token, minus beta * kl_t on every valid token.

    rewards (B,) float; mask (B, T) 1 on valid completion tokens; kl (B, T) per-token KL
    estimate (positions outside the mask are ignored). The mask may have holes (a multi-turn
    episode's observation tokens are 0 between its turns): the last 1 is the last valid token. A completion with no valid token has
    nowhere to hold its reward: its row is all zeros (every estimator then scores it 0).
    """
    token_rewards = torch.zeros_like(mask, dtype=rewards.dtype)  # (B, T)
    rows = torch.nonzero(mask.sum(-1) > 0).squeeze(-1)
    token_rewards[rows, last_valid_index(mask)[rows]] = rewards[rows]
    if kl is not None and beta:
        token_rewards = token_rewards - beta * kl * mask
    return token_rewards


def last_valid_index(mask: Tensor) -> Tensor:
    """(B,) long: the column of each row's last nonzero mask entry (0 for an all-zero row)."""
    valid = mask.ne(0)
    last = mask.shape[-1] - 1 - torch.argmax(valid.flip(-1).to(torch.int8), dim=-1)
    return torch.where(valid.any(-1), last, torch.zeros_like(last)).long()
