import pytest
from pydantic import ValidationError

from tests.trainers.rewards.helpers import score_one
from trainers.rewards.catalog import ExactMatchParams


def test_it_matches_the_full_completion_ignoring_case_and_spacing():
    result = score_one("exact_match", {}, "  Paris \n", answer="paris")
    assert result.score == 1.0
    assert result.error is None


def test_it_explains_a_mismatch_with_both_values():
    result = score_one("exact_match", {}, "41", answer="42")
    assert result.score == 0.0
    assert result.explanation == "expected '42', got '41'"


def test_it_compares_case_sensitively_when_asked():
    assert score_one("exact_match", {"case_sensitive": True}, "Paris", answer="paris").score == 0.0


def test_it_strips_punctuation_when_asked():
    assert score_one("exact_match", {"strip_punctuation": True}, "42.", answer="42").score == 1.0
    assert score_one("exact_match", {}, "42.", answer="42").score == 0.0


@pytest.mark.parametrize(
    ("extract", "extra", "completion"),
    [
        ("last_line", {}, "Let me think.\n6 * 7 = 42\n42\n\n"),
        ("boxed", {}, r"first \boxed{41}, no wait: \boxed{42}"),
        ("after_marker", {"marker": "Answer:"}, "Reasoning...\nAnswer: 42\nDone."),
        ("regex", {"pattern": r"<answer>(.*?)</answer>"}, "<think>hm</think><answer>42</answer>"),
    ],
)
def test_it_extracts_the_answer_before_comparing(extract, extra, completion):
    result = score_one("exact_match", {"extract": extract, **extra}, completion, answer="42")
    assert result.score == 1.0, result.explanation


def test_it_scores_zero_and_says_why_when_nothing_can_be_extracted():
    result = score_one("exact_match", {"extract": "boxed"}, "the answer is 42", answer="42")
    assert result.score == 0.0
    assert "no \\boxed" in result.explanation
    assert result.error is None  # a wrong format is the model's fault, not a criterion failure


def test_it_keeps_nested_braces_inside_boxed():
    result = score_one("exact_match", {"extract": "boxed"}, r"\boxed{\frac{1}{2}}", answer=r"\frac{1}{2}")
    assert result.score == 1.0


def test_it_accepts_any_answer_from_a_list():
    assert score_one("exact_match", {}, "NYC", answer=["New York", "NYC"]).score == 1.0


def test_it_reads_another_reference_field():
    assert score_one("exact_match", {"reference_field": "label"}, "yes", label="yes").score == 1.0


def test_a_missing_reference_field_is_an_error_naming_the_field():
    result = score_one("exact_match", {}, "42", label="42")
    assert result.score == 0.0
    assert "no field 'answer'" in result.error
    assert "label" in result.error


def test_it_refuses_regex_extraction_without_a_pattern():
    with pytest.raises(ValidationError, match="needs a pattern"):
        ExactMatchParams(extract="regex")
