"""Masked token statistics against hand-computed values."""

import math

import pytest
import torch

from trainers.algorithms.masked import masked_mean, masked_var, masked_whiten

VALUES = torch.tensor([[1.0, 2.0, float("nan")], [3.0, float("inf"), 6.0]])
MASK = torch.tensor([[1, 1, 0], [1, 0, 1]])


def test_masked_mean_ignores_masked_positions_even_when_they_hold_nan_or_inf():
    assert masked_mean(VALUES, MASK).item() == (1 + 2 + 3 + 6) / 4
    torch.testing.assert_close(masked_mean(VALUES, MASK, dim=-1), torch.tensor([1.5, 4.5]))


def test_masked_mean_of_nothing_is_zero():
    assert masked_mean(VALUES, torch.zeros_like(MASK)).item() == 0.0


def test_masked_var_is_unbiased_by_default():
    # mean 3; squared deviations 4 1 0 9 -> 14
    assert masked_var(VALUES, MASK).item() == pytest.approx(14 / 3)
    assert masked_var(VALUES, MASK, unbiased=False).item() == pytest.approx(14 / 4)


def test_masked_var_of_a_single_value_is_zero():
    assert masked_var(torch.tensor([[5.0, 1.0]]), torch.tensor([[1, 0]])).item() == 0.0


def test_masked_whiten_centres_and_scales_the_valid_values():
    out = masked_whiten(VALUES, MASK, eps=0.0)
    std = math.sqrt(14 / 3)
    torch.testing.assert_close(out, torch.tensor([[-2 / std, -1 / std, 0.0], [0.0, 0.0, 3 / std]]))


def test_masked_whiten_without_shift_keeps_the_mean():
    out = masked_whiten(VALUES, MASK, eps=0.0, shift_mean=False)
    std = math.sqrt(14 / 3)
    torch.testing.assert_close(out, torch.tensor([[1 / std, 2 / std, 0.0], [3 / std, 0.0, 6 / std]]))


def test_gradients_do_not_leak_nan_from_masked_positions():
    values = VALUES.clone().requires_grad_(True)
    masked_var(values, MASK).backward()
    assert torch.isfinite(values.grad).all()
    assert values.grad[~MASK.bool()].abs().max().item() == 0.0
