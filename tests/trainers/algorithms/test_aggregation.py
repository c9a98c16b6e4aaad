"""Loss aggregation modes against hand-computed reductions of one 3 x 3 loss matrix.

loss_mat     mask
1 2 3        1 1 0
4 5 6        1 1 1
7 8 9        0 0 0     (a sequence masked out entirely, e.g. by the overlong filter)
"""

import pytest
import torch

from trainers.algorithms.aggregation import LOSS_AGGREGATIONS, accumulation_weight, aggregate_loss, aggregation_units

LOSS = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]])
MASK = torch.tensor([[1.0, 1, 0], [1, 1, 1], [0, 0, 0]])

EXPECTED = {
    "token-mean": (1 + 2 + 4 + 5 + 6) / 5,
    "token-sum": 1 + 2 + 4 + 5 + 6,
    "seq-mean-token-mean": ((1 + 2) / 2 + (4 + 5 + 6) / 3) / 2,
    "seq-mean-token-sum": ((1 + 2) + (4 + 5 + 6)) / 2,
    "seq-mean-token-sum-norm": ((1 + 2) / 4 + (4 + 5 + 6) / 4) / 2,  # norm = 4
}


@pytest.mark.parametrize("mode", LOSS_AGGREGATIONS.names())
def test_each_mode_reduces_as_computed_by_hand(mode):
    assert aggregate_loss(LOSS, MASK, mode, norm=4).item() == pytest.approx(EXPECTED[mode])


@pytest.mark.parametrize("mode", LOSS_AGGREGATIONS.names())
def test_values_at_masked_positions_do_not_change_the_loss(mode):
    noisy = torch.where(MASK.bool(), LOSS, torch.tensor(float("inf")))
    assert aggregate_loss(noisy, MASK, mode, norm=4).item() == aggregate_loss(LOSS, MASK, mode, norm=4).item()


def test_token_mean_gradient_is_the_mask_over_the_token_count():
    loss = LOSS.clone().requires_grad_(True)
    aggregate_loss(loss, MASK, "token-mean").backward()
    torch.testing.assert_close(loss.grad, MASK / 5)


def test_seq_mean_token_mean_weighs_each_sequence_equally():
    loss = LOSS.clone().requires_grad_(True)
    aggregate_loss(loss, MASK, "seq-mean-token-mean").backward()
    torch.testing.assert_close(loss.grad, torch.tensor([[1 / 4, 1 / 4, 0], [1 / 6, 1 / 6, 1 / 6], [0, 0, 0]]))


@pytest.mark.parametrize("mode", LOSS_AGGREGATIONS.names())
def test_a_batch_without_valid_tokens_gives_zero_and_a_zero_gradient(mode):
    loss = LOSS.clone().requires_grad_(True)
    out = aggregate_loss(loss, torch.zeros_like(MASK), mode, norm=4)
    out.backward()
    assert out.item() == 0.0
    assert loss.grad.abs().max().item() == 0.0


def test_seq_mean_token_sum_norm_refuses_a_missing_norm():
    with pytest.raises(ValueError, match="needs a positive norm"):
        aggregate_loss(LOSS, MASK, "seq-mean-token-sum-norm", norm=None)


def test_an_unknown_mode_lists_the_valid_modes():
    with pytest.raises(KeyError, match="valid: token-mean, token-sum, seq-mean-token-mean"):
        aggregate_loss(LOSS, MASK, "sequence-max")


@pytest.mark.parametrize("mode", LOSS_AGGREGATIONS.names())
def test_micro_batches_weighted_by_their_units_give_the_whole_batch_loss(mode):
    loss = torch.randn(6, 5, generator=torch.Generator().manual_seed(1))
    mask = torch.tensor(
        [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]]
    )
    whole = aggregate_loss(loss, mask, mode, norm=5)
    micro = [(loss[i : i + 2], mask[i : i + 2]) for i in range(0, 6, 2)]
    total_units = aggregation_units(mask, mode)
    accumulated = sum(
        aggregate_loss(lm, m, mode, norm=5) * accumulation_weight(m, total_units, mode) for lm, m in micro
    )
    torch.testing.assert_close(accumulated, whole)
