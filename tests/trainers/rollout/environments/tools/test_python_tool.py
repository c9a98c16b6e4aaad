"""The python tool: one stateful interpreter per episode, in the sandbox."""

import pytest

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.tools import TOOLS, ToolError

LIMITS = EpisodeLimits(tool_timeout_s=2, tool_memory_mb=256, max_observation_chars=400)


@pytest.fixture
def python():
    tool = TOOLS.get("python").create({}, LIMITS)
    yield tool
    tool.close()


def run(tool, code):
    return tool.call("python", {"code": code})


def test_variables_and_imports_last_across_calls(python):
    assert run(python, "import math\nx = 41").text == ""
    assert run(python, "print('next:', x + 1)\nmath.sqrt(x + 8)").text == "next: 42\n7.0\n"
    assert run(python, "None").text == ""  # a None value shows nothing, as in a REPL


def test_an_exception_shows_the_traceback_of_the_cell_and_the_interpreter_goes_on(python):
    run(python, "def f(d):\n    return 1 / d\n")
    with pytest.raises(ToolError, match="^ZeroDivisionError: division by zero$") as caught:
        run(python, "print('before')\nf(0)")
    shown = caught.value.shown.text
    assert shown.startswith("before\nTraceback (most recent call last):\n")
    assert '<cell 1>", line 2, in f\n    return 1 / d' in shown  # the user's own lines, not the interpreter's
    assert "_interpreter" not in shown and "<interpreter>" not in shown
    assert run(python, "f(2)").text == "0.5\n"


def test_output_is_cut_in_the_sandbox_and_counted(python):
    out = run(python, "print('x' * 1_000_000)")
    assert (out.text, out.more) == ("x" * 400, 1_000_001 - 400)


def test_when_output_and_traceback_do_not_fit_the_output_is_cut_not_the_error(python):
    with pytest.raises(ToolError) as caught:
        run(python, "print('x' * 10_000)\nraise ValueError('the part that matters')")
    shown = caught.value.shown.text
    assert shown.startswith("xxx") and "[truncated: " in shown
    assert shown.endswith("ValueError: the part that matters\n")
    assert len(shown) <= LIMITS.max_observation_chars
