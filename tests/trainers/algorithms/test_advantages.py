"""Advantage estimators against numbers computed by hand on 2 groups x 3 samples.

The batch (T = 3, rewards on the last valid token except sample 0, whose reward is
split over two tokens to show that the score is the sum of token rewards):

    sample  group  mask      token_rewards     score
    0       7      1 1 1     0.5  0    0.5     1
    1       7      1 1 0     0    2    .       2
    2       7      1 0 0     3    .    .       3
    3       3      1 1 1     0    0    0       0
    4       3      1 1 0     0    0    .       0
    5       3      1 1 1     0    0    3       3

Group ids 7 and 3 are deliberately neither contiguous nor sorted. Positions marked
"." are padding and hold 100.0, which no result may see.
"""

import math

import pytest
import torch

from trainers.algorithms.advantages import ADVANTAGES
from trainers.algorithms.returns import discounted_returns

PAD = 100.0
MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 1, 1]], dtype=torch.float32)
REWARDS = torch.tensor(
    [[0.5, 0, 0.5], [0, 2, PAD], [3, PAD, PAD], [0, 0, 0], [0, 0, PAD], [0, 0, 3]], dtype=torch.float32
)
GROUPS = torch.tensor([7, 7, 7, 3, 3, 3])
LENGTHS = [3, 2, 1, 3, 2, 3]
# Estimators whose baseline comes from the other samples of a group.
GROUP_ESTIMATORS = ["grpo", "dr_grpo", "rloo", "reinforce_pp_baseline", "group_mean_batch_std"]


def _per_sequence(values: list[float]) -> torch.Tensor:
    """(B, T) tensor with values[i] on the valid tokens of sample i, 0 on padding."""
    return torch.tensor([[v] * n + [0.0] * (3 - n) for v, n in zip(values, LENGTHS, strict=True)])


def _advantages(name: str, eps: float = 0.0, gamma: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    return ADVANTAGES.get(name)(REWARDS, MASK, GROUPS, eps=eps, gamma=gamma)


def test_grpo_divides_by_the_unbiased_group_std():
    # group 7: scores 1 2 3, mean 2, unbiased var ((-1)^2 + 0 + 1^2) / 2 = 1
    # group 3: scores 0 0 3, mean 1, unbiased var (1 + 1 + 4) / 2 = 3
    s3 = math.sqrt(3)
    advantages, _ = _advantages("grpo")
    torch.testing.assert_close(advantages, _per_sequence([-1, 0, 1, -1 / s3, -1 / s3, 2 / s3]))


def test_grpo_adds_eps_to_the_std():
    advantages, _ = _advantages("grpo", eps=0.5)
    s3 = math.sqrt(3)
    expected = [-1 / 1.5, 0, 1 / 1.5, -1 / (s3 + 0.5), -1 / (s3 + 0.5), 2 / (s3 + 0.5)]
    torch.testing.assert_close(advantages, _per_sequence(expected))


def test_dr_grpo_subtracts_the_group_mean_only():
    advantages, _ = _advantages("dr_grpo", eps=0.5)
    torch.testing.assert_close(advantages, _per_sequence([1 - 2, 2 - 2, 3 - 2, 0 - 1, 0 - 1, 3 - 1]))


def test_rloo_subtracts_the_mean_of_the_other_samples():
    expected = [1 - (2 + 3) / 2, 2 - (1 + 3) / 2, 3 - (1 + 2) / 2, 0 - (0 + 3) / 2, 0 - (0 + 3) / 2, 3 - (0 + 0) / 2]
    advantages, _ = _advantages("rloo")
    torch.testing.assert_close(advantages, _per_sequence(expected))


def test_reinforce_pp_whitens_the_token_returns_over_the_batch():
    # reward-to-go with gamma = 1, valid tokens only
    returns_by_sample = [[1.0, 0.5, 0.5], [2.0, 2.0], [3.0], [0.0, 0.0, 0.0], [0.0, 0.0], [3.0, 3.0, 3.0]]
    flat = [r for row in returns_by_sample for r in row]  # 14 valid tokens
    mean = sum(flat) / 14  # 18 / 14
    var = sum((r - mean) ** 2 for r in flat) / 13  # unbiased
    eps = 1e-3
    expected = torch.tensor(
        [[(r - mean) / math.sqrt(var + eps) for r in row] + [0.0] * (3 - len(row)) for row in returns_by_sample]
    )
    advantages, returns = _advantages("reinforce_pp", eps=eps)
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, torch.tensor([row + [0.0] * (3 - len(row)) for row in returns_by_sample]))


def test_reinforce_pp_discounts_the_returns_with_gamma():
    # gamma = 0.5: sample 0 -> t2: 0.5, t1: 0 + 0.5 * 0.5, t0: 0.5 + 0.5 * 0.25; sample 5 -> 3, 1.5, 0.75
    returns = discounted_returns(REWARDS, MASK, gamma=0.5)
    torch.testing.assert_close(returns[0], torch.tensor([0.625, 0.25, 0.5]))
    torch.testing.assert_close(returns[1], torch.tensor([2 * 0.5, 2.0, 0.0]))
    torch.testing.assert_close(returns[5], torch.tensor([0.75, 1.5, 3.0]))


def test_reinforce_pp_baseline_divides_group_centred_scores_by_the_batch_std():
    centred = [1 - 2, 2 - 2, 3 - 2, 0 - 1, 0 - 1, 3 - 1]
    flat = [c for c, n in zip(centred, LENGTHS, strict=True) for _ in range(n)]  # 14 valid tokens
    mean = sum(flat) / 14  # -1 / 14: the variance is about the token mean
    var = sum((c - mean) ** 2 for c in flat) / 13
    eps = 1e-3
    advantages, _ = _advantages("reinforce_pp_baseline", eps=eps)
    torch.testing.assert_close(advantages, _per_sequence([c / math.sqrt(var + eps) for c in centred]))


def test_group_mean_batch_std_divides_group_centred_scores_by_the_std_of_the_batch_rewards():
    # Lite PPO: scores 1 2 3 0 0 3 (one per sequence, lengths play no part), batch mean 1.5,
    # unbiased var (0.25 + 0.25 + 2.25 + 2.25 + 2.25 + 2.25) / 5 = 1.9
    centred = [1 - 2, 2 - 2, 3 - 2, 0 - 1, 0 - 1, 3 - 1]
    eps = 1e-3
    advantages, _ = _advantages("group_mean_batch_std", eps=eps)
    torch.testing.assert_close(advantages, _per_sequence([c / (math.sqrt(1.9) + eps) for c in centred]))


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
def test_outcome_estimators_return_the_reward_to_go(name):
    _, returns = _advantages(name)
    torch.testing.assert_close(returns, discounted_returns(REWARDS, MASK, gamma=1.0))


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
def test_a_group_of_one_sample_gets_advantage_zero(name):
    rewards = torch.tensor([[1.0], [3.0], [5.0]])
    mask = torch.ones(3, 1)
    advantages, _ = ADVANTAGES.get(name)(rewards, mask, torch.tensor([0, 0, 1]), eps=1e-6, gamma=1.0)
    assert advantages[2, 0].item() == 0.0
    assert advantages[0, 0].item() < 0 < advantages[1, 0].item()


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
def test_a_group_whose_rewards_all_agree_gets_advantage_zero(name):
    rewards = torch.tensor([[1.0], [1.0], [0.0], [2.0]])
    advantages, _ = ADVANTAGES.get(name)(rewards, torch.ones(4, 1), torch.tensor([0, 0, 1, 1]), eps=1e-6, gamma=1.0)
    assert advantages[:2].abs().max().item() == 0.0


@pytest.mark.parametrize("name", ADVANTAGES.names())
def test_values_at_masked_positions_do_not_change_the_advantages(name):
    advantages, returns = _advantages(name, eps=1e-6, gamma=0.9)
    noisy = torch.where(
        MASK.bool(), REWARDS, torch.randn(REWARDS.shape, generator=torch.Generator().manual_seed(0)) * 1e3
    )
    noisy_advantages, noisy_returns = ADVANTAGES.get(name)(noisy, MASK, GROUPS, eps=1e-6, gamma=0.9)
    torch.testing.assert_close(noisy_advantages, advantages, rtol=0, atol=0)
    torch.testing.assert_close(noisy_returns, returns, rtol=0, atol=0)
    assert advantages[~MASK.bool()].abs().max().item() == 0.0


@pytest.mark.parametrize("name", ADVANTAGES.names())
def test_advantages_carry_no_gradient(name):
    rewards = REWARDS.clone().requires_grad_(True)
    advantages, _ = ADVANTAGES.get(name)(rewards, MASK, GROUPS, eps=1e-6, gamma=1.0)
    assert not advantages.requires_grad
