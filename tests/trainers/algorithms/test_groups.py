"""Per-group statistics broadcast back to samples, with unsorted non-contiguous group ids."""

import math

import torch

from trainers.algorithms.groups import group_has_spread, group_mean, group_size, group_std

VALUES = torch.tensor([1.0, 4.0, 2.0, 10.0, 3.0])
GROUPS = torch.tensor([8, 2, 8, -1, 8])  # group 8: 1 2 3; group 2: 4; group -1: 10


def test_group_size_and_mean_are_broadcast_to_each_sample():
    assert group_size(GROUPS).tolist() == [3, 1, 3, 1, 3]
    assert group_mean(VALUES, GROUPS).tolist() == [2.0, 4.0, 2.0, 10.0, 2.0]


def test_group_std_is_unbiased_and_zero_for_a_group_of_one():
    # group 8: squared deviations 1 0 1 -> unbiased var 2 / 2 = 1, biased 2 / 3
    torch.testing.assert_close(group_std(VALUES, GROUPS), torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0]))
    biased = math.sqrt(2 / 3)
    torch.testing.assert_close(
        group_std(VALUES, GROUPS, unbiased=False), torch.tensor([biased, 0.0, biased, 0.0, biased])
    )


def test_group_has_spread_is_false_for_groups_of_one_or_of_equal_values():
    assert group_has_spread(VALUES, GROUPS).tolist() == [True, False, True, False, True]
    assert group_has_spread(torch.tensor([2.0, 2.0]), torch.tensor([0, 0])).tolist() == [False, False]
