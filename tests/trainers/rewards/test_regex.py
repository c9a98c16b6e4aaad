import time

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


def test_a_catastrophically_backtracking_pattern_ends_in_time_as_a_criterion_error():
    # (a|aa)+$ on a+b tries every way to split the a's: exponential even for the regex engine,
    # which (unlike re) finds (a+)+$ on the same text at once.
    started = time.monotonic()
    result = score_one("regex", {"pattern": "(a|aa)+$", "timeout_s": 0.5}, "a" * 40 + "b")
    assert time.monotonic() - started < 3  # 0.5 s and the engine's check interval, on a busy machine
    assert result.score == 0.0
    assert result.error == "pattern timed out after 0.5 s on a 41-char completion"


def test_the_time_limit_does_not_touch_an_ordinary_match_on_a_long_completion():
    result = score_one("regex", {"pattern": r"<answer>\d+</answer>"}, "x" * 50_000 + "<answer>7</answer>")
    assert (result.score, result.error) == (1.0, None)


def test_an_exact_match_extraction_pattern_has_the_same_time_limit():
    started = time.monotonic()
    params = {"extract": "regex", "pattern": "(a|aa)+$"}
    result = score_one("exact_match", params, "a" * 40 + "b", answer="a")
    assert time.monotonic() - started < 4
    assert result.score == 0.0 and "pattern timed out after 1 s on a 41-char completion" in result.error


@pytest.mark.parametrize("pattern", ["(a+)+$", "(.*)*", r"(\w+\s?)*", "(?:x|y+)*z"])
def test_nested_quantifiers_are_warned_about_on_save(pattern):
    warnings = RegexParams(pattern=pattern).warnings()
    assert list(warnings) == ["pattern"] and "nests quantifiers" in warnings["pattern"]


@pytest.mark.parametrize("pattern", [r"<answer>.*</answer>", r"\d+(\.\d+)?", "(ab)+", "(a?)+", r"\p{L}+"])
def test_ordinary_patterns_get_no_warning(pattern):
    assert RegexParams(pattern=pattern).warnings() == {}
