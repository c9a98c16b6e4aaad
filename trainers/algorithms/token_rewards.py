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
    estimate (positions outside the mask are ignored). A completion with no valid token has
    nowhere to hold its reward: its row is all zeros (every estimator then scores it 0).
    """
    token_rewards = torch.zeros_like(mask, dtype=rewards.dtype)  # (B, T)
    lengths = mask.sum(-1).long()  # (B,)
    rows = torch.nonzero(lengths > 0).squeeze(-1)
    token_rewards[rows, lengths[rows] - 1] = rewards[rows]
    if kl is not None and beta:
        token_rewards = token_rewards - beta * kl * mask
    return token_rewards
