"""Per-prompt statistics: the Beta posterior update (by hand), statuses, fractions, state."""

import math

import pytest

from trainers.curriculum.stats import PromptBook, rollout_passed


def test_it_updates_the_posterior_by_counting_passes_and_fails():
    book = PromptBook(["a", "b"], prior_alpha=1.0, prior_beta=1.0)
    book.observe(3, "a", [True, False, False, True])  # 2 pass, 2 fail
    book.observe(5, "a", [True, True, True, False])  # 3 pass, 1 fail
    a = book["a"]
    # Beta(1, 1) + 5 passes + 3 fails = Beta(6, 4).
    assert (a.alpha, a.beta) == (6.0, 4.0)
    assert a.pass_rate == pytest.approx(0.6)
    # var = 6 * 4 / (10^2 * 11) = 24 / 1100
    assert a.pass_rate_std == pytest.approx(math.sqrt(24 / 1100))
    assert (a.draws, a.passes, a.samples, a.last_step) == (2, 5, 8, 5)
    assert a.history == [(3, 2, 4), (5, 3, 4)]


def test_decay_pulls_old_evidence_back_to_the_prior():
    book = PromptBook(["a"], prior_alpha=1.0, prior_beta=1.0, decay=0.5)
    book.observe(1, "a", [True, True, True, True])
    # alpha = 0.5 * 1 + 0.5 * 1 + 4 = 5; beta = 0.5 * 1 + 0.5 * 1 + 0 = 1
    assert (book["a"].alpha, book["a"].beta) == (5.0, 1.0)
    book.observe(2, "a", [False, False, False, False])
    # alpha = 0.5 * 5 + 0.5 * 1 + 0 = 3; beta = 0.5 * 1 + 0.5 * 1 + 4 = 5
    assert (book["a"].alpha, book["a"].beta) == (3.0, 5.0)
    assert book["a"].pass_rate == pytest.approx(3 / 8)


def test_statuses_follow_their_definitions():
    book = PromptBook(["unseen", "hopeless", "solved", "learnable", "was_solved"])
    book.observe(1, "hopeless", [False, False])
    book.observe(2, "hopeless", [False, False])
    book.observe(1, "solved", [False, True])
    book.observe(2, "solved", [True, True])
    book.observe(1, "learnable", [True, False])
    book.observe(1, "was_solved", [True, True])
    book.observe(2, "was_solved", [False, False])  # solved once: it can be learned, not yet reliably
    assert {pid: book.status(pid) for pid in book.stats} == {
        "unseen": "unseen",
        "hopeless": "never_solved",
        "solved": "solved",
        "learnable": "learnable",
        "was_solved": "learnable",
    }
    assert book["hopeless"].fail_streak == 2 and book["solved"].pass_streak == 1
    assert book.fractions() == {
        "prompts/unseen_frac": 0.2,
        "prompts/solved_frac": 0.2,
        "prompts/learnable_frac": 0.4,
        "prompts/never_solved_frac": 0.2,
    }


def test_the_event_describes_the_latest_group():
    book = PromptBook(["a"], prior_alpha=2.0, prior_beta=2.0)
    event = book.observe(7, "a", [True, False, False]).event()
    assert event == {
        "prompt_id": "a",
        "draws": 1,
        "alpha": 3.0,
        "beta": 4.0,
        "pass_rate": pytest.approx(3 / 7),
        "pass_rate_std": pytest.approx(math.sqrt(12 / (49 * 8))),
        "last_step": 7,
        "status": "learnable",
        "step_passed": 1,
        "step_samples": 3,
    }


def test_state_round_trips():
    book = PromptBook(["a", "b"], decay=0.9)
    book.observe(1, "a", [True, False])
    book.observe(2, "b", [False, False])
    other = PromptBook(["a", "b"], decay=0.9)
    other.load_state_dict(book.state_dict())
    assert other.stats == book.stats
    other.observe(3, "a", [True])
    book.observe(3, "a", [True])
    assert other["a"] == book["a"]


def test_a_rollout_passes_by_the_rubric_verdict_when_there_is_one():
    assert rollout_passed(0.2, True, pass_reward=1.0)
    assert not rollout_passed(5.0, False, pass_reward=1.0)
    assert rollout_passed(1.0, None, pass_reward=1.0)
    assert not rollout_passed(0.99, None, pass_reward=1.0)


def test_the_event_adds_up_the_groups_of_the_latest_step():
    book = PromptBook(["a"])
    book.observe(1, "a", [True, True])
    book.observe(2, "a", [True, False])
    event = book.observe(2, "a", [False, False, True]).event()
    assert (event["draws"], event["step_passed"], event["step_samples"]) == (3, 2, 5)
