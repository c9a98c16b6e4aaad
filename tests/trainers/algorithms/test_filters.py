"""DAPO filters: dynamic sampling, overlong filtering and the soft overlong penalty."""

import pytest
import torch

from trainers.algorithms.filters import groups_with_reward_spread, overlong_loss_mask, overlong_soft_penalty


def test_dynamic_sampling_keeps_only_groups_whose_rewards_differ():
    # group 5: 1 1 1 (all agree), group 2: 0 1 0 (spread), group 9: alone
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.5])
    groups = torch.tensor([5, 2, 5, 2, 5, 2, 9])
    keep = groups_with_reward_spread(scores, groups)
    assert keep.tolist() == [False, True, False, True, False, True, False]


def test_dynamic_sampling_keeps_a_tiny_spread():
    keep = groups_with_reward_spread(torch.tensor([0.3, 0.3 + 1e-6]), torch.tensor([0, 0]))
    assert keep.tolist() == [True, True]


def test_overlong_filter_removes_every_token_of_a_truncated_completion():
    mask = torch.tensor([[1.0, 1, 1], [1, 1, 0], [1, 1, 1]])
    out = overlong_loss_mask(torch.tensor([True, False, False]), mask)
    torch.testing.assert_close(out, torch.tensor([[0.0, 0, 0], [1, 1, 0], [1, 1, 1]]))


def test_soft_penalty_is_zero_before_the_buffer_and_linear_to_minus_factor_at_max():
    # max 100, buffer 20: the ramp starts after 80 tokens; factor 0.5
    lengths = torch.tensor([10, 80, 81, 90, 100])
    penalty = overlong_soft_penalty(lengths, max_new_tokens=100, buffer=20, factor=0.5)
    torch.testing.assert_close(penalty, torch.tensor([0.0, 0.0, -1 / 20 * 0.5, -10 / 20 * 0.5, -0.5]))


def test_soft_penalty_stays_at_minus_factor_past_max():
    assert overlong_soft_penalty(torch.tensor([130]), max_new_tokens=100, buffer=20, factor=1.0).item() == -1.0


def test_soft_penalty_refuses_a_buffer_longer_than_the_budget():
    with pytest.raises(ValueError, match="overlong buffer must be in 1..max_new_tokens"):
        overlong_soft_penalty(torch.tensor([5]), max_new_tokens=10, buffer=11, factor=1.0)
