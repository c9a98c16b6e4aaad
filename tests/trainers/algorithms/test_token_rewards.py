"""Sequence rewards placed on tokens, by hand: lengths 3, 1 and 0 (no valid token), T = 3."""

import torch

from trainers.algorithms.token_rewards import token_level_rewards

MASK = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]], dtype=torch.float32)
REWARDS = torch.tensor([2.0, -1.0, 5.0])


def test_the_reward_sits_on_the_last_valid_token():
    expected = torch.tensor([[0, 0, 2.0], [-1.0, 0, 0], [0, 0, 0]])
    torch.testing.assert_close(token_level_rewards(REWARDS, MASK), expected)


def test_kl_in_the_reward_charges_every_valid_token_beta_times_its_kl():
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.4, 99.0, 99.0], [99.0, 99.0, 99.0]])  # 99: outside the mask
    beta = 0.5
    expected = torch.tensor([[-0.05, -0.1, 2.0 - 0.15], [-1.0 - 0.2, 0, 0], [0, 0, 0]])
    torch.testing.assert_close(token_level_rewards(REWARDS, MASK, kl, beta), expected)


def test_without_beta_the_kl_is_ignored():
    kl = torch.full((3, 3), 7.0)
    torch.testing.assert_close(token_level_rewards(REWARDS, MASK, kl, 0.0), token_level_rewards(REWARDS, MASK))


def test_the_outcome_goes_on_the_last_valid_token_of_a_mask_with_holes():
    # A multi-turn episode: turn 0 (2 tokens), observation (2 tokens, mask 0), turn 1 (1 token), padding.
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    out = token_level_rewards(torch.tensor([2.0, -1.0]), mask)
    assert out.tolist() == [[0.0, 0.0, 0.0, 0.0, 2.0, 0.0], [-1.0, 0.0, 0.0, 0.0, 0.0, 0.0]]
