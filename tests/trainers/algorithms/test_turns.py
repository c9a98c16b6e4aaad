"""TurnLayout: per-episode turn lists as (B, T) / (B, K) tensors, and per-turn means."""

import torch

from trainers.algorithms.turns import TurnLayout


def test_build_pads_turns_and_columns():
    layout = TurnLayout.build([[0, 0, -1, 1], [0]], [[0.5, 1.0], [2.0]], [1.0, 0.0], [["s0", "s1"], ["s0"]], columns=5)
    assert layout.turn_index.tolist() == [[0, 0, -1, 1, -1], [0, -1, -1, -1, -1]]
    assert layout.turn_rewards.tolist() == [[0.5, 1.0], [2.0, 0.0]]
    assert layout.turn_valid.tolist() == [[True, True], [True, False]]
    assert layout.num_turns.tolist() == [2, 1]


def test_turn_means_average_each_turns_tokens_only():
    layout = TurnLayout.build([[0, 0, -1, 1]], [[0.0, 0.0]], [0.0], [["", ""]], columns=4)
    values = torch.tensor([[1.0, 3.0, 100.0, 5.0]])  # the observation's 100 is in no turn
    assert layout.turn_means(values).tolist() == [[2.0, 5.0]]
