"""The real-model demo's rubric (trainers/demos/real.py): the right number earns 0.6, brevity adds up to
0.4 on top of it only, and a wrong answer scores 0 however short it is."""

import pytest

from trainers.demos.real import real_rows, real_rubric
from trainers.rewards.rubric import Rubric
from trainers.rewards.sample import Sample


def reward(completion: str, answer: str) -> float:
    (result,) = Rubric.from_spec(real_rubric()).score([Sample(prompt="What is 20 + 19?", completion=completion,
                                                              fields={"answer": answer})])  # fmt: skip
    return result.reward


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("39", 1.0),  # right and bare: the top score
        ("Eight.", 0.0),  # short but wrong: brevity alone earns nothing (it earned 0.4 before)
        ("8", 0.0),
        # right in prose: 0.6 + 0.4 * brief, brief = 1 - 0.02 per character beyond 8 (32 characters here)
        ("The sum of 20 and 19 is 39 here.", pytest.approx(0.6 + 0.4 * (1 - 0.02 * (32 - 8)))),
    ],
)
def test_brevity_counts_only_when_the_number_is_right(completion, expected):
    assert reward(completion, "39") == expected


def test_a_right_answer_always_passes_and_a_wrong_one_never_does():
    rubric = Rubric.from_spec(real_rubric())
    samples = [Sample(prompt="", completion=text, fields={"answer": "39"}) for text in ("39", "It is 39, " * 10, "40")]
    assert [r.passed for r in rubric.score(samples)] == [True, True, False]


def test_rows_are_sums_with_their_answer():
    rows = real_rows(count=20, seed=1)
    for row in rows:
        a, b = (int(n) for n in row["prompt"].removeprefix("What is ").removesuffix("?").split(" + "))
        assert row["answer"] == str(a + b)
