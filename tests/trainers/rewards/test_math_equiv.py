import threading
import time

import pytest

from tests.trainers.rewards.helpers import sample, score_one
from trainers.rewards.criteria import build_criterion


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        (r"The answer is $\frac{1}{2}$.", "0.5"),
        (r"So we get \boxed{0.5}", r"\frac{1}{2}"),
        (r"Therefore \boxed{2}", "2"),
        ("6 * 7 = 42", "42"),
        (r"\boxed{\frac{2}{4}}", "1/2"),
        (r"x = \boxed{\sqrt{4}}", "2"),
        ("The total is 1,000 apples", "1000"),
    ],
)
def test_equivalent_answers_score_one(completion, answer):
    result = score_one("math_equiv", {}, completion, answer=answer)
    assert result.score == 1.0, result.explanation
    assert result.error is None


def test_it_explains_a_wrong_answer_as_written():
    result = score_one("math_equiv", {}, r"so \boxed{0.4}", answer=r"\frac{1}{2}")
    assert (result.score, result.explanation) == (0.0, r"expected '\frac{1}{2}', got '0.4'")


def test_no_answer_scores_zero_with_a_reason():
    result = score_one("math_equiv", {}, "I do not know.", answer="2")
    assert (result.score, result.explanation, result.error) == (0.0, "no math answer found; expected '2'", None)


def test_boxed_extraction_ignores_numbers_outside_the_box():
    assert score_one("math_equiv", {"extract": "boxed"}, r"\boxed{3} or maybe 2", answer="3").score == 1.0
    result = score_one("math_equiv", {"extract": "boxed"}, "it is 3", answer="3")
    assert result.score == 0.0
    assert result.explanation.startswith("no \\boxed")


def test_last_number_extraction_takes_the_final_number():
    assert score_one("math_equiv", {"extract": "last_number"}, "12 apples, 30 pears: 42", answer="42").score == 1.0


def test_an_answer_that_makes_sympy_hang_is_cut_off_by_the_time_limit():
    started = time.monotonic()
    result = score_one("math_equiv", {"timeout_s": 1}, r"\boxed{9^{9^{9^{9}}}}", answer="5")
    assert result.score == 0.0
    assert "math-verify took longer than 1 s" in result.error
    assert time.monotonic() - started < 5


def test_off_the_main_thread_it_scores_in_a_worker_process_with_the_same_results():
    # Signals (math-verify's timeout) only work in the main thread; elsewhere a sandbox worker scores.
    criterion = build_criterion("math_equiv", {"timeout_s": 1})
    batch = [
        sample(r"\boxed{0.5}", answer=r"\frac{1}{2}"),
        sample(r"\boxed{9^{9^{9^{9}}}}", answer="5"),
        sample("7", answer="7"),
    ]
    out = {}
    thread = threading.Thread(target=lambda: out.update(results=criterion.score_batch(batch)))
    thread.start()
    thread.join(timeout=30)
    right, hanging, after = out["results"]
    assert right.score == 1.0
    assert hanging.score == 0.0
    assert "math-verify took longer than 1 s" in hanging.error
    assert after.score == 1.0
