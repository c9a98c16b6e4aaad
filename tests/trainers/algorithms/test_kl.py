"""KL estimators against hand-computed values and the exact expectation they estimate."""

import math

import pytest
import torch

from trainers.algorithms.kl import KL_ESTIMATORS, kl_penalty

LOGP = torch.tensor([[-1.0, -2.0]])
REF = torch.tensor([[-1.5, -1.0]])


def test_k1_is_the_log_ratio():
    torch.testing.assert_close(kl_penalty(LOGP, REF, "k1"), torch.tensor([[0.5, -1.0]]))


def test_k2_is_half_the_squared_log_ratio():
    torch.testing.assert_close(kl_penalty(LOGP, REF, "k2"), torch.tensor([[0.5 * 0.5**2, 0.5 * 1.0**2]]))


def test_k3_is_ratio_minus_log_ratio_minus_one():
    # ref - logp = -0.5 and 1.0
    expected = [[math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1]]
    torch.testing.assert_close(kl_penalty(LOGP, REF, "k3"), torch.tensor(expected))


def test_k3_is_capped_at_ten_with_a_finite_gradient_far_from_the_reference():
    logp = torch.tensor([[-1000.0, -1.0, -1.0]], requires_grad=True)
    ref = torch.tensor([[-1.0, -1000.0, -6.0]])  # log ratios +999, -999 (clamped to +-20) and -5
    out = kl_penalty(logp, ref, "k3")
    out.sum().backward()
    assert out[0, :2].tolist() == [10.0, 10.0]  # exp(20) - 21 and exp(-20) + 19, both over the cap
    assert out[0, 2].item() == pytest.approx(math.exp(-5) + 5 - 1)  # under the cap: exact
    assert torch.isfinite(logp.grad).all()


def test_abs_is_the_absolute_log_ratio():
    torch.testing.assert_close(kl_penalty(LOGP, REF, "abs"), torch.tensor([[0.5, 1.0]]))


@pytest.mark.parametrize("name", ["k2", "k3", "abs"])
def test_nonnegative_estimators_are_zero_when_the_policies_agree_and_positive_otherwise(name):
    assert kl_penalty(LOGP, LOGP, name).abs().max().item() == 0.0
    assert (kl_penalty(LOGP, REF, name) > 0).all()


@pytest.mark.parametrize("name", ["k1", "k3"])
def test_unbiased_estimators_average_to_the_exact_kl_under_the_policy(name):
    # expectation over tokens y ~ pi, taken exactly over a 5-token vocabulary
    logp = torch.log_softmax(torch.tensor([0.3, -1.0, 2.0, 0.0, 0.5]), dim=-1)
    ref = torch.log_softmax(torch.tensor([1.0, 0.2, -0.5, 0.0, 0.1]), dim=-1)
    exact = (logp.exp() * (logp - ref)).sum()
    estimate = (logp.exp() * KL_ESTIMATORS.get(name)(logp[None], ref[None])[0]).sum()
    torch.testing.assert_close(estimate, exact)
