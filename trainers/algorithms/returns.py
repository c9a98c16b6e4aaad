"""Per-sequence scores and token-level returns: the quantities every advantage estimator starts from,
trajectory-level (`advantages`) and turn-level (`turn_advantages`) alike."""

from __future__ import annotations

import torch
from torch import Tensor

from trainers.algorithms.masked import masked_sum, zero_masked


def sequence_scores(token_rewards: Tensor, mask: Tensor) -> Tensor:
    """(B,) sum of the rewards of the valid tokens of each sequence."""
    return masked_sum(token_rewards, mask, dim=-1)


def discounted_returns(token_rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """(B, T) reward-to-go R_t = r_t + gamma * R_{t+1} over valid tokens, 0 at masked positions.

    With gamma = 1 (the default) this is a reversed cumsum; otherwise a Python loop over T
    (as verl), because powers gamma^(s-t) in closed form underflow for long responses.
    """
    rewards = zero_masked(token_rewards, mask)  # (B, T)
    if gamma == 1.0:
        return zero_masked(rewards.flip(-1).cumsum(-1).flip(-1), mask)
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])  # (B,)
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return zero_masked(returns, mask)
