"""Off-policy corrections (trainers.algorithms.mismatch.OFF_POLICY_CORRECTIONS) against numbers worked out by hand.

Two sequences of three token slots, the last slot of the second one padding. The behaviour policy (the
engine, when it sampled) gave every token logprob -2; the proximal policy (the trainer, at the step's
start) gives -2 + log r, so the per-token ratio r = pi_prox / pi_behav is:

    row 0: 1.5, 0.25, 1.0
    row 1: 4.0, 0.4,  (pad)

Sequence ratios (products): R0 = 1.5 * 0.25 * 1 = 0.375, R1 = 4 * 0.4 = 1.6.
Geometric means: G0 = 0.375 ** (1/3) = 0.721125, G1 = 1.6 ** (1/2) = 1.264911.
"""

import math

import pytest
import torch

from trainers.algorithms.mismatch import OFF_POLICY_CORRECTIONS
from trainers.algorithms.policy_losses import ppo_clip_loss

RATIOS = [[1.5, 0.25, 1.0], [4.0, 0.4, 1.0]]
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
BEHAV = torch.full((2, 3), -2.0)
PROX = BEHAV + torch.tensor(RATIOS).log()


def close(actual: torch.Tensor, expected: list[list[float]]) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected), rtol=1e-5, atol=1e-7)


def weights(name: str, low: float = 0.5, high: float = 2.0):
    return OFF_POLICY_CORRECTIONS.get(name)(PROX, BEHAV, MASK, low=low, high=high)


def test_decoupled_weighs_each_token_by_its_untruncated_ratio():
    out = weights("decoupled")
    close(out.weights, [[1.5, 0.25, 1.0], [4.0, 0.4, 0.0]])
    # mean over the 5 valid tokens: (1.5 + 0.25 + 1 + 4 + 0.4) / 5 = 1.43
    assert out.weight_mean == pytest.approx(1.43, rel=1e-5)
    assert (out.truncated_frac, out.rejected_frac) == (0.0, 0.0)


def test_token_tis_truncates_the_ratio_at_high():
    out = weights("tis", high=2.0)
    # 4.0 -> 2.0; the rest are below the cap. Mean (1.5 + 0.25 + 1 + 2 + 0.4) / 5 = 1.03.
    close(out.weights, [[1.5, 0.25, 1.0], [2.0, 0.4, 0.0]])
    assert out.weight_mean == pytest.approx(1.03, rel=1e-5)
    assert out.truncated_frac == pytest.approx(1 / 5)


def test_token_mis_drops_tokens_above_high_instead_of_truncating_them():
    out = weights("mis", high=2.0)
    # 4.0 -> 0. Mean (1.5 + 0.25 + 1 + 0 + 0.4) / 5 = 0.63.
    close(out.weights, [[1.5, 0.25, 1.0], [0.0, 0.4, 0.0]])
    assert out.weight_mean == pytest.approx(0.63, rel=1e-5)
    assert out.rejected_frac == pytest.approx(1 / 5)


def test_icepop_drops_tokens_outside_the_band_in_either_direction():
    out = weights("icepop", low=0.5, high=2.0)
    # 0.25 and 0.4 are below 0.5, 4.0 above 2: only 1.5 and 1.0 stay. Mean (1.5 + 1) / 5 = 0.5.
    close(out.weights, [[1.5, 0.0, 1.0], [0.0, 0.0, 0.0]])
    assert out.weight_mean == pytest.approx(0.5, rel=1e-5)
    assert out.rejected_frac == pytest.approx(3 / 5)


def test_sequence_tis_weighs_every_token_by_the_truncated_sequence_ratio():
    out = weights("seq_tis", high=1.5)
    # R0 = 0.375 stays; R1 = 1.6 -> 1.5 on both of its tokens. Mean (3 * 0.375 + 2 * 1.5) / 5 = 0.825.
    close(out.weights, [[0.375] * 3, [1.5, 1.5, 0.0]])
    assert out.weight_mean == pytest.approx(0.825, rel=1e-5)
    assert out.truncated_frac == pytest.approx(2 / 5)


def test_sequence_mis_drops_a_whole_sequence_whose_ratio_is_above_high():
    out = weights("seq_mis", high=1.5)
    # R1 = 1.6 > 1.5: row 1 weighs 0. Mean 3 * 0.375 / 5 = 0.225.
    close(out.weights, [[0.375] * 3, [0.0, 0.0, 0.0]])
    assert out.weight_mean == pytest.approx(0.225, rel=1e-5)
    assert out.rejected_frac == pytest.approx(2 / 5)


def test_sequence_icepop_bands_the_geometric_mean_ratio():
    out = weights("seq_icepop", low=0.8, high=2.0)
    # G0 = 0.721 < 0.8: row 0 dropped; G1 = 1.265 kept on both tokens. Mean 2 * 1.264911 / 5 = 0.505964.
    g1 = math.sqrt(1.6)
    close(out.weights, [[0.0] * 3, [g1, g1, 0.0]])
    assert out.weight_mean == pytest.approx(0.505964, rel=1e-5)
    assert out.rejected_frac == pytest.approx(3 / 5)


@pytest.mark.parametrize("name", OFF_POLICY_CORRECTIONS.names())
def test_values_at_masked_positions_change_nothing_and_carry_no_gradient(name):
    prox, behav = PROX.clone().requires_grad_(), BEHAV.clone()
    prox.data[1, 2], behav[1, 2] = 50.0, float("-inf")  # padding may hold anything
    out = OFF_POLICY_CORRECTIONS.get(name)(prox, behav, MASK, low=0.5, high=2.0)
    reference = weights(name)
    assert out.weights[1, 2].item() == 0.0 and not out.weights.requires_grad
    assert torch.allclose(out.weights, reference.weights) and out.weight_mean == pytest.approx(reference.weight_mean)


def test_decoupled_ppo_clips_against_the_proximal_policy_and_weighs_by_the_behaviour_ratio():
    # One sequence of two tokens, token-mean. pi_theta / pi_prox = [1.1, 0.5]; A = [+1, -1]; clip 0.2.
    #   token 0: A > 0, ratio 1.1 inside [0.8, 1.2]: loss -A * 1.1 = -1.1
    #   token 1: A < 0, ratio 0.5 below 0.8: max(-A * 0.5, -A * 0.8) = 0.8 (clipped)
    # pi_prox / pi_behav = [2.0, 0.5] weighs them: [-2.2, 0.4], token-mean -0.9.
    # d loss / d logp_0 = -A * w * ratio / 2 = -1 * 2 * 1.1 / 2 = -1.1; token 1 is clipped: 0.
    behav = torch.tensor([[-1.0, -1.0]])
    prox = behav + torch.tensor([[2.0, 0.5]]).log()
    logp = (prox + torch.tensor([[1.1, 0.5]]).log()).requires_grad_()
    mask = torch.ones(1, 2)
    w = OFF_POLICY_CORRECTIONS.get("decoupled")(prox, behav, mask, low=0.5, high=2.0).weights
    out = ppo_clip_loss(
        logp, prox, torch.tensor([[1.0, -1.0]]), mask, clip_ratio_low=0.2, clip_ratio_high=0.2, dual_clip_c=None,
        loss_agg_mode="token-mean", loss_agg_norm=None, is_weights=w,
    )  # fmt: skip
    assert out.loss.item() == pytest.approx(-0.9, rel=1e-5)
    out.loss.backward()
    close(logp.grad, [[-1.1, 0.0]])
    assert out.clip_frac_low.item() == pytest.approx(0.5)


def test_on_policy_every_correction_weighs_one():
    # Behaviour = proximal (synchronous, same kernels): no correction changes the loss.
    for name in OFF_POLICY_CORRECTIONS.names():
        out = OFF_POLICY_CORRECTIONS.get(name)(BEHAV, BEHAV, MASK, low=0.5, high=2.0)
        assert out.weights.tolist() == MASK.tolist(), name
