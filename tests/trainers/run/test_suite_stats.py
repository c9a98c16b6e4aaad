"""A suite cell's scores against numbers worked out by hand on small fixed cases."""

import pytest

from trainers.run.suite_stats import Estimate, bootstrap_means, cell_scores


def test_one_prompt_half_solved_among_four_unsolved_ones():
    # Prompt 0: 2 of 4 samples pass (reward 1), prompts 1-3: none. Per prompt: mean reward .5, 0, 0, 0;
    # pass@1 = c/k = .5, 0, 0, 0; pass@4 = 1 - C(2,4)/C(4,4) = 1 for prompt 0 (C(2,4) = 0), else 0.
    # A bootstrap resample draws prompt 0 j times, j ~ Binomial(4, 1/4): P(j) = 81, 108, 54, 12, 1 (/256),
    # cumulative .316 .738 .949 .996 1. The 2.5% point is j = 0, the 97.5% point j = 3 (.949 < .975 <= .996):
    # mean reward and pass@1 in [0, 3 x .5 / 4] = [0, .375]; pass@4 in [0, 3/4].
    rewards = [[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    scores = cell_scores(rewards, [[r == 1 for r in row] for row in rewards], seed=0)
    assert (scores.num_prompts, scores.k) == (4, 4)
    assert scores.reward_mean == Estimate(0.125, 0.0, 0.375)
    assert scores.pass_at_1 == Estimate(0.125, 0.0, 0.375)
    assert scores.pass_at_k == Estimate(0.25, 0.0, 0.75)


def test_three_solved_prompts_of_four():
    # Per prompt pass@1: 1, 1, 1, 0. The resample draws the failed prompt j ~ Binomial(4, 1/4) times, mean
    # 1 - j/4. Its 97.5% point is j = 0 (mean 1); its 2.5% point j = 3 (P(j >= 3) = 13/256 = .051 > .025,
    # P(j = 4) = .004 < .025): mean 1/4. The threshold says pass; the reward says by how much (.5 here).
    rewards = [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.5, 0.5]]
    passed = [[True, True], [True, True], [True, True], [False, False]]
    scores = cell_scores(rewards, passed, seed=3)
    assert scores.pass_at_1 == Estimate(0.75, 0.25, 1.0)
    assert scores.pass_at_k == Estimate(0.75, 0.25, 1.0)
    assert scores.reward_mean == Estimate(0.875, 0.625, 1.0)  # 1 - 3 x .5 / 4 at the low end
    assert scores.metrics("suite/sums") == {
        "suite/sums/reward_mean": 0.875, "suite/sums/reward_mean_low": 0.625, "suite/sums/reward_mean_high": 1.0,
        "suite/sums/pass@1": 0.75, "suite/sums/pass@1_low": 0.25, "suite/sums/pass@1_high": 1.0,
        "suite/sums/pass@2": 0.75, "suite/sums/pass@2_low": 0.25, "suite/sums/pass@2_high": 1.0,
    }  # fmt: skip


def test_the_interval_is_seeded_and_narrows_with_more_prompts():
    few = [[0.0, 1.0, 0.3, 0.9, 0.5, 0.2, 0.7, 0.4]]
    first = bootstrap_means(few, resamples=1000, confidence=0.95, seed=7)
    assert first == bootstrap_means(few, resamples=1000, confidence=0.95, seed=7)
    assert first != bootstrap_means(few, resamples=1000, confidence=0.95, seed=8)
    many = [few[0] * 16]  # the same spread over 16 times as many prompts: about a quarter of the width
    (wide,), (narrow,) = first, bootstrap_means(many, resamples=1000, confidence=0.95, seed=7)
    assert wide.low < wide.value < wide.high and narrow.value == pytest.approx(wide.value)
    assert 0.15 < (narrow.high - narrow.low) / (wide.high - wide.low) < 0.4


def test_unequal_sample_counts_and_no_prompts_are_refused():
    with pytest.raises(ValueError, match="same number k"):
        cell_scores([[1.0, 0.0], [1.0]], [[True, False], [True]])
    with pytest.raises(ValueError, match="no prompts"):
        cell_scores([], [])
