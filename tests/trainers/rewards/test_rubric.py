import dataclasses
import json

import pytest
from pydantic import ValidationError

from tests.trainers.rewards.helpers import sample
from trainers.report import CriterionScore
from trainers.rewards.criteria.base import CRITERIA
from trainers.rewards.rubric import Rubric, score_pairs
from trainers.spec import RubricSpec

CRITERIA_SPEC = [
    {"name": "correct", "kind": "exact_match", "weight": 2.0, "params": {"extract": "boxed"}},
    {"name": "format", "kind": "regex", "weight": 0.5, "params": {"pattern": r"\\boxed\{"}},
    {"name": "brief", "kind": "length", "weight": 1.0, "params": {"target_max": 4, "slope": 0.25}},
]


def rubric(**extra) -> Rubric:
    return Rubric.from_spec(RubricSpec(criteria=CRITERIA_SPEC, **extra))


def test_the_reward_is_the_weighted_sum_of_criterion_scores():
    right = sample(r"so \boxed{42}", answer="42")  # correct 1, format 1, brief 1 (2 words)
    wrong = sample(r"I guess it is \boxed{41} maybe", answer="42")  # 0, 1, 6 words: 1 - 0.25 * 2 = 0.5
    results = rubric().score([right, wrong])
    assert [r.reward for r in results] == pytest.approx([2.0 + 0.5 + 1.0, 0.0 + 0.5 + 0.5])
    assert results[1].scores["correct"].explanation == "expected '42', got '41'"
    assert results[0].passed is None


def test_the_pass_flag_compares_the_reward_with_the_threshold():
    results = rubric(pass_threshold=3.5).score(
        [sample(r"\boxed{42}", answer="42"), sample(r"\boxed{42} " + "pad " * 6, answer="42")]
    )
    # 2 + 0.5 + 1 = 3.5 passes (>=); the long one: 2 + 0.5 + (1 - 0.25 * 3) = 2.75 fails
    assert [r.passed for r in results] == [True, False]


def test_a_formula_combines_raw_scores_instead_of_weights():
    results = rubric(combine="formula", formula="correct * min(format, brief)").score(
        [sample(r"\boxed{42} " + "pad " * 5, answer="42")]  # 1 * min(1, 1 - 0.25 * 2)
    )
    assert results[0].reward == pytest.approx(0.5)


def test_a_formula_that_fails_on_a_sample_gives_zero_and_an_error():
    [result] = rubric(combine="formula", formula="format / correct").score([sample(r"\boxed{1}", answer="2")])
    assert result.reward == 0.0
    assert "ZeroDivisionError" in result.error


def test_a_formula_with_an_unknown_name_fails_when_the_spec_is_validated():
    with pytest.raises(ValueError, match=r"unknown name 'score'.*correct, format, brief"):
        rubric(combine="formula", formula="score * 2")


def test_a_criterion_missing_its_reference_scores_zero_and_the_others_still_count():
    [result] = rubric().score([sample(r"\boxed{42}")])  # no answer field
    assert result.scores["correct"].error.startswith("KeyError")
    assert result.reward == pytest.approx(0.5 + 1.0)


def test_results_turn_into_json():
    [result] = rubric(pass_threshold=1).score([sample(r"\boxed{42}", answer="42")])
    data = json.loads(json.dumps(dataclasses.asdict(result)))
    assert data["scores"]["correct"] == {"score": 1.0, "explanation": "matched '42'", "error": None}
    assert data["passed"] is True


def test_it_records_how_long_each_criterion_took():
    r = rubric()
    r.score([sample("x", answer="x")])
    assert set(r.last_timings) == {"correct", "format", "brief"}
    assert all(t >= 0 for t in r.last_timings.values())


def test_an_empty_batch_gives_no_results():
    assert rubric().score([]) == []


def test_score_pairs_scores_plain_dicts():
    spec = {"criteria": CRITERIA_SPEC}
    results = score_pairs(spec, [{"prompt": "q", "completion": r"\boxed{42}", "answer": "42"}])
    assert results[0].reward == pytest.approx(3.5)


def test_score_pairs_names_the_bad_pair():
    with pytest.raises(ValueError, match="pair 1: missing field 'completion'"):
        score_pairs({"criteria": CRITERIA_SPEC}, [{"prompt": "q", "completion": "a"}, {"prompt": "q"}])


def test_an_unknown_kind_is_refused_with_the_valid_kinds():
    with pytest.raises(ValidationError, match="unknown criterion kind 'exactmatch'.*exact_match"):
        RubricSpec(criteria=[{"name": "a", "kind": "exactmatch"}])


def test_a_criterion_whose_batch_breaks_scores_zero_for_every_sample():
    class Broken:
        runs_elsewhere = False

        def score_batch(self, samples):
            raise RuntimeError("judge fell over")

        def close(self):
            pass

    good = CRITERIA.get("length").from_params({})
    r = Rubric({"broken": Broken(), "len": good}, {"broken": 1.0, "len": 1.0})
    results = r.score([sample("a"), sample("b")])
    assert [res.scores["broken"] for res in results] == [
        CriterionScore(
            0.0,
            "criterion 'broken' failed: RuntimeError: judge fell over",
            "criterion 'broken' failed: RuntimeError: judge fell over",
        )
    ] * 2
    assert [res.reward for res in results] == [1.0, 1.0]


def test_registering_a_taken_kind_raises():
    with pytest.raises(ValueError, match="already registered"):
        CRITERIA.register("regex")(type("Again", (), {}))
