import time

import pytest

from tests.trainers.rewards.helpers import sample
from trainers.rewards.criteria import build_criterion
from trainers.rewards.criteria.code_exec import parse_tests
from trainers.sandbox.process import isolation

STDIO_TESTS = [
    {"input": "1 2\n", "output": "3\n"},
    {"input": "10 -4\n", "output": "6"},
    {"input": "0 0", "output": "0"},
]
ASSERT_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]


def fenced(code: str) -> str:
    return f"Here is my solution:\n```python\n{code}\n```\nDone."


def score_all(completions, tests, **params):
    criterion = build_criterion("code_exec", {"timeout_s": 2.0, "memory_mb": 256, **params})
    return criterion.score_batch([sample(c, tests=tests) for c in completions])


def test_stdio_tests_score_the_fraction_passed():
    correct = fenced("a, b = map(int, input().split())\nprint(a + b)")
    wrong = fenced("a, b = map(int, input().split())\nprint(a - b)")  # passes only "0 0"
    right, off = score_all([correct, wrong], STDIO_TESTS)
    assert (right.score, right.explanation) == (1.0, "3/3 tests passed")
    assert off.score == pytest.approx(1 / 3)
    assert off.explanation == "1/3 tests passed; test 1: expected '3', got '-1'"


def test_assert_tests_run_after_the_program():
    right, off = score_all(
        [fenced("def add(a, b):\n    return a + b"), fenced("def add(a, b):\n    return a * b")], ASSERT_TESTS
    )
    assert right.score == 1.0
    # a * b: 1*2 != 3, -1*1 != 0, 2*2 == 4
    assert off.score == pytest.approx(1 / 3)
    assert off.explanation.startswith("1/3 tests passed; test 1 (assert add(1, 2) == 3): AssertionError")


def test_all_or_nothing_without_partial_credit():
    [off] = score_all([fenced("def add(a, b):\n    return a * b")], ASSERT_TESTS, partial_credit=False)
    assert off.score == 0.0


def test_an_infinite_loop_is_stopped_at_the_time_limit():
    started = time.monotonic()
    [looping, right] = score_all(
        [fenced("while True:\n    pass"), fenced("a, b = map(int, input().split())\nprint(a + b)")], STDIO_TESTS
    )
    assert looping.score == 0.0
    assert "timed out" in looping.explanation
    assert right.score == 1.0
    assert time.monotonic() - started < 6


def test_a_loop_in_one_assert_leaves_the_earlier_results():
    tests = ["assert add(1, 2) == 3", "while True: pass", "assert add(2, 2) == 4"]
    [result] = score_all([fenced("def add(a, b):\n    return a + b")], tests)
    assert result.score == pytest.approx(1 / 3)
    assert "test 2 (while True: pass): timed out" in result.explanation


def test_a_syntax_error_in_the_program_names_its_line():
    [result] = score_all([fenced("def add(a, b)\n    return a + b")], ASSERT_TESTS)
    assert result.score == 0.0
    assert "SyntaxError at line 1" in result.explanation
    assert result.error is None  # the model's fault, not the criterion's


def test_a_completion_without_a_code_block_scores_zero():
    [result] = score_all(["I would add the numbers."], ASSERT_TESTS)
    assert (result.score, result.explanation) == (0.0, "no ```fenced``` code block in the completion")


def test_missing_tests_are_an_error_naming_the_field():
    criterion = build_criterion("code_exec", {})
    [result] = criterion.score_batch([sample(fenced("print(1)"))])
    assert "no field 'tests'" in result.error


@pytest.mark.parametrize(
    ("raw", "style", "count"),
    [
        ('[{"input": "1", "output": "1"}]', "stdio", 1),
        ({"inputs": ["1", "2"], "outputs": ["1", "2"]}, "stdio", 2),
        ("assert f(1) == 1\nassert f(2) == 2\n", "asserts", 2),
        (["assert True"], "asserts", 1),
    ],
)
def test_it_reads_the_usual_test_formats(raw, style, count):
    got_style, tests = parse_tests(raw, "tests")
    assert (got_style, len(tests)) == (style, count)


def test_it_refuses_tests_it_cannot_read():
    with pytest.raises(ValueError, match="every test must be"):
        parse_tests([{"in": "1"}], "tests")


def test_programs_may_read_and_write_through_the_raw_streams():
    program = "import sys, os\na, b = map(int, sys.stdin.buffer.readline().split())\nsys.stdout.write(str(a + b))\nsys.stdout.flush()\nos.write(1, b'\\n')"
    [result] = score_all([fenced(program)], STDIO_TESTS)
    assert (result.score, result.explanation) == (1.0, "3/3 tests passed")


def test_a_program_that_exits_nonzero_fails_that_test():
    [result] = score_all([fenced("import sys\nprint(3)\nsys.exit(1)")], STDIO_TESTS[:1])
    assert result.score == 0.0
    assert "SystemExit: 1" in result.explanation


@pytest.mark.skipif(isolation() != "bubblewrap", reason="bubblewrap cannot run here")
def test_a_program_cannot_read_the_workers_files(tmp_path):
    secret = tmp_path / "elsewhere" / "token"
    secret.parent.mkdir()
    secret.write_text("do not leak")
    program = f"print(open({str(secret)!r}).read())"
    [result] = score_all([fenced(program)], [{"input": "", "output": "do not leak"}])
    assert result.score == 0.0
    assert "FileNotFoundError" in result.explanation, result.explanation
    assert secret.read_text() == "do not leak"  # readable here: the sandbox, not the file, stopped it
