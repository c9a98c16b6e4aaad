"""On-policy distillation's per-token term (trainers.algorithms.distillation) against numbers computed by hand."""

import math

import pytest
import torch

from trainers.algorithms.distillation import DISTILL_SIGNALS, distilled_advantages, reverse_kl, teacher_mean


def test_reverse_kl_is_the_students_logprob_minus_the_teachers_on_each_sampled_token():
    student = torch.log(torch.tensor([[0.5, 0.25, 0.8]]))
    teacher = torch.log(torch.tensor([[0.25, 0.25, 0.4]]))
    # log 0.5 - log 0.25 = log 2; equal: 0; log 0.8 - log 0.4 = log 2
    mask = torch.ones(1, 3)
    assert torch.allclose(reverse_kl(student, teacher, mask), torch.tensor([[math.log(2), 0.0, math.log(2)]]))
    assert DISTILL_SIGNALS.get("reverse_kl") is reverse_kl
    # Off the mask it is 0, whatever the logprobs there.
    assert reverse_kl(student, teacher, torch.tensor([[1.0, 1.0, 0.0]]))[0, 2] == 0


def test_the_centered_signal_subtracts_the_mean_over_scored_tokens_only():
    student = torch.tensor([[-1.0, -2.0, -3.0], [-1.0, 0.0, 0.0]])
    teacher = torch.tensor([[-2.0, -2.0, -1.0], [-4.0, 5.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    # Reverse KL on the scored tokens: 1, 0, -2, 3 (mean 0.5); the centred signal: 0.5, -0.5, -2.5, 2.5.
    out = DISTILL_SIGNALS.get("reverse_kl_centered")(student, teacher, mask)
    assert torch.allclose(out, torch.tensor([[0.5, -0.5, -2.5], [2.5, 0.0, 0.0]]))


def test_the_advantage_gains_minus_coef_times_the_signal_beside_the_weighted_rubric_advantage():
    # Two sequences of three tokens; the second has one padding position.
    rubric = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, 0.0]])
    signal = torch.tensor([[0.5, -0.2, 0.0], [1.0, 0.3, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    out = distilled_advantages(rubric, signal, mask, coef=2.0, reward_weight=0.5)
    # By hand: 0.5 * A - 2 * s; the padded position is 0 whatever its signal.
    expected = torch.tensor([[0.5 - 1.0, 0.5 + 0.4, 0.5 - 0.0], [-0.5 - 2.0, -0.5 - 0.6, 0.0]])
    assert torch.allclose(out, expected)


def test_pure_distillation_is_the_signal_alone():
    rubric = torch.tensor([[3.0, 3.0]])
    signal = torch.tensor([[0.25, -0.5]])
    out = distilled_advantages(rubric, signal, torch.ones(1, 2), coef=1.0, reward_weight=0.0)
    assert torch.equal(out, torch.tensor([[-0.25, 0.5]]))


def test_teachers_of_one_row_are_averaged_by_weight_and_a_row_of_none_gets_no_term():
    signals = torch.tensor(
        [
            [[1.0, 2.0], [5.0, 5.0], [7.0, 7.0]],  # teacher 0 on rows 0 and 1
            [[4.0, 8.0], [0.0, 0.0], [7.0, 7.0]],  # teacher 1 on row 0 only
        ]
    )  # (K=2, B=3, T=2)
    weights = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]])  # row 2: no teacher
    mean, covered = teacher_mean(signals, weights)
    # Row 0: (1*1 + 3*4) / 4 = 3.25, (1*2 + 3*8) / 4 = 6.5; row 1: teacher 0 alone; row 2: 0.
    assert torch.allclose(mean, torch.tensor([[3.25, 6.5], [5.0, 5.0], [0.0, 0.0]]))
    assert covered.tolist() == [True, True, False]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_masked_position_never_leaks_into_the_advantage(value):
    signal = torch.tensor([[0.1, value]])
    out = distilled_advantages(torch.zeros(1, 2), signal, torch.tensor([[1.0, 0.0]]), coef=1.0, reward_weight=1.0)
    assert out[0, 1] == 0 and out[0, 0] == pytest.approx(-0.1)
