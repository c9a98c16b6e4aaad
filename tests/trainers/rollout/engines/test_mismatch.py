import math

import pytest
import torch

from trainers.algorithms.mismatch import logprob_gap, tis_clip_frac, tis_weights

# Two sequences, three token slots; the last slot of the second row is padding.
ENGINE = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, -3.0, 0.0]])
TRAINER = torch.tensor([[-1.5, -2.0, -0.2], [-0.1, -1.0, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


def test_the_gap_is_the_mean_and_max_absolute_difference_over_response_tokens():
    out = logprob_gap(ENGINE, TRAINER, MASK)
    # |diffs| on valid tokens: 0.5, 0, 0.3, 0, 2.0
    assert out["rollout/logprob_gap_mean"] == pytest.approx((0.5 + 0.3 + 2.0) / 5)
    assert out["rollout/logprob_gap_max"] == pytest.approx(2.0)


def test_the_engine_trainer_kl_is_the_k3_estimate_over_response_tokens():
    deltas = [-0.5, 0.0, 0.3, 0.0, 2.0]  # trainer - engine
    expected = sum(math.exp(d) - 1 - d for d in deltas) / 5
    assert logprob_gap(ENGINE, TRAINER, MASK)["rollout/engine_trainer_kl"] == pytest.approx(expected, rel=1e-6)


def test_values_at_masked_positions_do_not_change_the_gap():
    engine = ENGINE.clone()
    engine[1, 2] = float("-inf")  # padding in an engine's logprob tensor can hold anything
    trainer = TRAINER.clone()
    trainer[1, 2] = 123.0
    assert logprob_gap(engine, trainer, MASK) == logprob_gap(ENGINE, TRAINER, MASK)


def test_an_empty_mask_gives_zero_gap_not_nan():
    out = logprob_gap(ENGINE, TRAINER, torch.zeros_like(MASK))
    assert out == {"rollout/logprob_gap_mean": 0.0, "rollout/logprob_gap_max": 0.0, "rollout/engine_trainer_kl": 0.0}


def test_tis_weights_are_the_probability_ratio_truncated_at_the_cap():
    w = tis_weights(TRAINER, ENGINE, MASK, cap=2.0)
    expected = torch.tensor([[math.exp(-0.5), 1.0, math.exp(0.3)], [1.0, 2.0, 0.0]])  # e^2 > 2 is capped
    torch.testing.assert_close(w, expected)


def test_tis_weights_are_zero_where_masked_even_when_the_ratio_is_infinite():
    engine = ENGINE.clone()
    engine[1, 2] = float("-inf")
    assert tis_weights(TRAINER, engine, MASK, cap=5.0)[1, 2].item() == 0.0


def test_tis_weights_carry_no_gradient():
    trainer = TRAINER.clone().requires_grad_(True)
    assert not tis_weights(trainer, ENGINE, MASK, cap=2.0).requires_grad


def test_tis_rejects_a_non_positive_cap():
    with pytest.raises(ValueError, match="cap"):
        tis_weights(TRAINER, ENGINE, MASK, cap=0.0)


def test_tis_clip_frac_counts_tokens_whose_weight_hit_the_cap():
    assert tis_clip_frac(TRAINER, ENGINE, MASK, cap=2.0) == pytest.approx(1 / 5)
