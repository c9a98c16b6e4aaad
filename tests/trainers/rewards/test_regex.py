import pytest
from pydantic import ValidationError

from tests.trainers.rewards.helpers import score_one
from trainers.rewards.catalog import RegexParams


def test_it_scores_one_when_the_pattern_is_found_anywhere():
    result = score_one("regex", {"pattern": r"<answer>.*</answer>"}, "x <answer>4</answer> y")
    assert result.score == 1.0
    assert "<answer>4</answer>" in result.explanation


def test_fullmatch_needs_the_whole_completion():
    params = {"pattern": r"<think>.*</think>\s*<answer>.*</answer>", "mode": "fullmatch"}
    assert score_one("regex", params, "<think>a</think> <answer>4</answer>").score == 1.0
    assert score_one("regex", params, "hello <think>a</think> <answer>4</answer>").score == 0.0


def test_invert_scores_one_when_it_does_not_match():
    assert score_one("regex", {"pattern": "sorry", "invert": True}, "the answer is 4").score == 1.0
    assert score_one("regex", {"pattern": "sorry", "invert": True}, "sorry, no").score == 0.0


def test_multiline_anchors_lines():
    text = "intro\nAnswer: 4"
    assert score_one("regex", {"pattern": "^Answer:", "multiline": True}, text).score == 1.0
    assert score_one("regex", {"pattern": "^Answer:"}, text).score == 0.0


def test_a_bad_pattern_is_refused_when_the_rubric_is_validated():
    with pytest.raises(ValidationError, match="invalid regular expression"):
        RegexParams(pattern="(unclosed")
