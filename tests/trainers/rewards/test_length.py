import pytest
from pydantic import ValidationError

from tests.trainers.rewards.helpers import score_one
from trainers.rewards.catalog import LengthParams


def test_it_scores_one_inside_the_target_range():
    result = score_one("length", {"target_min": 2, "target_max": 5}, "one two three")
    assert result.score == 1.0
    assert result.explanation == "3 words, within [2, 5]"


def test_it_loses_slope_per_word_over_the_maximum():
    # 8 words, 3 over the maximum of 5: 1 - 0.1 * 3 = 0.7
    result = score_one("length", {"target_max": 5, "slope": 0.1}, "a b c d e f g h")
    assert result.score == pytest.approx(0.7)


def test_it_loses_slope_per_char_under_the_minimum():
    # 4 chars, 6 under the minimum of 10: 1 - 0.05 * 6 = 0.7
    assert score_one("length", {"unit": "chars", "target_min": 10, "slope": 0.05}, "abcd").score == pytest.approx(0.7)


def test_the_score_is_floored_at_zero():
    assert score_one("length", {"target_max": 1, "slope": 0.5}, "a b c d e").score == 0.0


def test_it_refuses_a_minimum_above_the_maximum():
    with pytest.raises(ValidationError, match="above target_max"):
        LengthParams(target_min=10, target_max=5)
