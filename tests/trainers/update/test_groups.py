"""Scored groups shaped for training (`shape_groups`), by hand: DAPO's soft overlong penalty on the
rewards, and the spread that dynamic sampling keeps a group for, judged by the outcome (with the
environment's turn rewards), never by the length penalty alone."""

import pytest

from trainers.episodes import Episode, Turn
from trainers.rewards.sample import RubricResult
from trainers.rollout.generate import ScoredGroup
from trainers.spec.algorithm import AlgorithmSpec
from trainers.update.groups import shape_groups


def scored(lengths: list[int], outcomes: list[float], turn_rewards: list[float] | None = None) -> ScoredGroup:
    """One group: episode i sampled `lengths[i]` tokens in one turn and scored `outcomes[i]`."""
    turn_rewards = turn_rewards or [0.0] * len(lengths)
    episodes = [
        Episode(prompt_ids=[1, 2], messages=[], turns=[Turn(token_ids=[7] * n, text="", reward=r)])
        for n, r in zip(lengths, turn_rewards, strict=True)
    ]
    return ScoredGroup(None, episodes, [RubricResult(reward=o, scores={}) for o in outcomes])


def algorithm(**settings) -> AlgorithmSpec:
    return AlgorithmSpec.model_validate({"group_size": 4, **settings})


def test_the_soft_overlong_penalty_falls_linearly_over_the_buffer():
    # limit 6, buffer 2, factor 0.5: 0 up to 4 tokens, then -0.25 per token, -0.5 at the limit.
    algo = algorithm(overlong_penalty=True, overlong_buffer=2, overlong_penalty_factor=0.5)
    [group] = shape_groups([scored([3, 4, 5, 6], [1.0, 1.0, 1.0, 1.0])], algo, max_completion_tokens=6)
    assert group.rewards == pytest.approx([1.0, 1.0, 0.75, 0.5])


def test_without_the_penalty_the_rewards_are_the_outcomes():
    [group] = shape_groups([scored([3, 6], [0.2, 0.7])], algorithm(), max_completion_tokens=6)
    assert group.rewards == pytest.approx([0.2, 0.7])
    assert group.has_spread


def test_a_length_penalty_alone_is_no_spread():
    algo = algorithm(overlong_penalty=True, overlong_buffer=2, overlong_penalty_factor=0.5)
    same, different = shape_groups(
        [scored([3, 6], [1.0, 1.0]), scored([3, 3], [0.0, 1.0])], algo, max_completion_tokens=6
    )
    assert same.rewards == pytest.approx([1.0, 0.5])  # the penalty tells them apart ...
    assert not same.has_spread  # ... but their outcomes agree: no signal about the answers
    assert different.has_spread


def test_turn_rewards_count_in_the_spread_and_the_totals():
    [group] = shape_groups([scored([2, 2], [0.5, 0.5], turn_rewards=[0.0, 0.25])], algorithm(), 6)
    assert group.has_spread and group.rewards == pytest.approx([0.5, 0.5])
    assert group.totals == pytest.approx([0.5, 0.75])
