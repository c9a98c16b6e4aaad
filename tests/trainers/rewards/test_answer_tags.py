"""A final turn of repeated answer tags is scored in bounded time: the answer-tag extraction a
rubric uses (a user pattern with a lazy group) runs under the regex time limit, and the next
completion scores as usual."""

import time

from tests.trainers.rewards.helpers import score_one

PARAMS = {"extract": "regex", "pattern": r"<answer>(.*?)</answer>"}


def test_repeated_answer_tags_end_in_time_and_the_next_completion_scores():
    started = time.monotonic()
    result = score_one("exact_match", PARAMS, "<answer>" * 200_000, answer="42")
    assert time.monotonic() - started < 5  # quadratic without the limit: minutes
    assert result.score == 0.0 and "pattern timed out after 1 s on a 1,600,000-char completion" in result.error
    assert score_one("exact_match", PARAMS, "so <answer>42</answer>", answer="42").score == 1.0
