"""Rollout budgets: fixed sizes, the knapsack allocation (a 3-prompt case solved by hand), BroRL's chunks."""

from fractions import Fraction

import pytest
from pydantic import ValidationError

from tests.trainers.curriculum.conftest import make_prompts, run_spec
from trainers.curriculum.budgets import ROLLOUT_BUDGETS, signal_probability
from trainers.curriculum.stats import PromptBook
from trainers.spec import step_rollouts


def book_with(posteriors: dict[str, tuple[float, float]]) -> PromptBook:
    book = PromptBook(list(posteriors))
    for pid, (alpha, beta) in posteriors.items():
        book[pid].alpha, book[pid].beta = alpha, beta
    return book


# Three prompts: p0 unseen Beta(1, 1), p1 harder Beta(1, 4) (mean 0.2), p2 hardest Beta(1, 9) (mean 0.1).
# f(n) = P(a group of n holds a pass and a fail) = 1 - E[p^n] - E[(1-p)^n], with
# E[p^n] = prod_{k<n} (a + k) / (a + b + k) under Beta(a, b):
#   p0: E[p^n] = E[(1-p)^n] = 1 / (n + 1)           -> f(2) = 1/3,  f(3) = 1/2,  f(4) = 3/5
#   p1: E[p^n] = 24 / ((n+1)(n+2)(n+3)(n+4)),
#       E[(1-p)^n] = 4 / (n + 4)                    -> f(2) = 4/15, f(3) = 2/5,  f(4) = 17/35
#   p2: E[p^n] = n! 9! / (n + 9)!, E[(1-p)^n] = 9 / (n + 9)
#                                                   -> f(2) = 9/55, f(3) = 27/110, f(4) = 219/715
HAND = {
    "p0": {2: Fraction(1, 3), 3: Fraction(1, 2), 4: Fraction(3, 5)},
    "p1": {2: Fraction(4, 15), 3: Fraction(2, 5), 4: Fraction(17, 35)},
    "p2": {2: Fraction(9, 55), 3: Fraction(27, 110), 4: Fraction(219, 715)},
}
POSTERIORS = {"p0": (1.0, 1.0), "p1": (1.0, 4.0), "p2": (1.0, 9.0)}


def test_the_signal_probability_matches_the_hand_computed_values():
    for pid, values in HAND.items():
        for n, expected in values.items():
            assert signal_probability(*POSTERIORS[pid], n) == pytest.approx(float(expected), abs=1e-12)
    assert signal_probability(3.0, 2.0, 1) == pytest.approx(0.0, abs=1e-12)  # one rollout never holds both


def test_knapsack_splits_the_budget_by_marginal_signal():
    # Budget 9 for 3 prompts, sizes 2..4: start at [2, 2, 2], 3 rollouts to give. Marginal gains:
    #   p0: 2->3 1/6 = 0.167, 3->4 1/10 = 0.100
    #   p1: 2->3 2/15 = 0.133, 3->4 3/35 = 0.086
    #   p2: 2->3 9/110 = 0.082, 3->4 0.061
    # Greedy: p0 (0.167), p1 (0.133), p0 (0.100) -> [4, 3, 2]; the optimum, since each f is concave.
    spec = run_spec(budget="knapsack", rollouts_per_step=9, min_group_size=2, max_group_size=4)
    allocation = ROLLOUT_BUDGETS.get("knapsack")(make_prompts(3), book_with(POSTERIORS), spec)
    assert allocation.sizes == [4, 3, 2] and allocation.chunk is None
    # No other split of 9 within 2..4 reaches a larger total signal.
    splits = [(a, b, 9 - a - b) for a in range(2, 5) for b in range(2, 5) if 2 <= 9 - a - b <= 4]
    best = max(splits, key=lambda s: sum(HAND[f"p{i}"][n] for i, n in enumerate(s)))
    assert best == (4, 3, 2)


def test_a_larger_knapsack_gives_the_hardest_prompt_the_most():
    # Near p = 0.5 a group saturates within a few rollouts; a rare pass needs many draws to appear.
    spec = run_spec(budget="knapsack", rollouts_per_step=72, min_group_size=2, max_group_size=64)
    sizes = ROLLOUT_BUDGETS.get("knapsack")(make_prompts(3), book_with(POSTERIORS), spec).sizes
    assert sum(sizes) == 72 and sizes[0] < sizes[1] < sizes[2]


def test_knapsack_shares_the_step_budget_with_a_round_of_fewer_prompts():
    spec = run_spec(prompts_per_step=4, group_size=4, budget="knapsack", min_group_size=2, max_group_size=8)
    book = book_with({f"p{i}": (1.0, 1.0) for i in range(4)})
    sizes = ROLLOUT_BUDGETS.get("knapsack")(make_prompts(2), book, spec).sizes  # 16 a step -> 8 for 2 prompts
    assert sizes == [4, 4]


def test_fixed_and_brorl_sizes():
    spec = run_spec(group_size=5, max_group_size=128, generation_chunk=32)
    book = book_with(POSTERIORS)
    assert ROLLOUT_BUDGETS.get("fixed")(make_prompts(3), book, spec).sizes == [5, 5, 5]
    allocation = ROLLOUT_BUDGETS.get("brorl")(make_prompts(3), book, spec)
    assert allocation.sizes == [128, 128, 128] and allocation.chunk == 32


def test_a_knapsack_budget_outside_the_group_bounds_is_refused():
    with pytest.raises(ValidationError, match="cannot give each of 3 prompts between min_group_size"):
        run_spec(budget="knapsack", rollouts_per_step=5, min_group_size=2, max_group_size=4)
    with pytest.raises(ValidationError, match="min_group_size must not exceed max_group_size"):
        run_spec(min_group_size=9, max_group_size=4)
    with pytest.raises(ValidationError, match="unknown rollout budget 'greedy'; valid: fixed, knapsack, brorl"):
        run_spec(budget="greedy")


@pytest.mark.parametrize(
    "curriculum, expected",
    [
        ({}, 3 * 4),  # fixed: group_size per prompt
        ({"budget": "knapsack"}, 3 * 4),  # no total given: what fixed costs
        ({"budget": "knapsack", "rollouts_per_step": 9, "max_group_size": 4}, 9),
        ({"budget": "brorl", "max_group_size": 16}, 3 * 16),
    ],
)
def test_step_rollouts_counts_what_each_budget_allocates_for_a_full_step(curriculum, expected):
    # The step cost the studio shows (step_rollouts, through RunSpec.rollouts_per_step) is what the
    # budget really hands out when a round draws prompts_per_step prompts.
    spec = run_spec(**curriculum)
    sizes = ROLLOUT_BUDGETS.get(spec.curriculum.budget)(make_prompts(3), book_with(POSTERIORS), spec).sizes
    assert spec.rollouts_per_step == sum(sizes) == expected


def test_step_rollouts_names_an_unknown_budget():
    with pytest.raises(ValueError, match="unknown rollout budget 'wide'; known: fixed, knapsack, brorl"):
        step_rollouts("wide", 3, 4)
