"""The calculator evaluates arithmetic by walking the parsed expression, and refuses the rest."""

import pytest

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.tools import TOOLS, ToolError


def calculate(expression: str) -> str:
    return TOOLS.get("calculator").create({}, EpisodeLimits()).call("calculator", {"expression": expression})


@pytest.mark.parametrize(
    ("expression", "shown"),
    [
        ("1 + 2 * 3", "7"),
        ("(1 + 2) * 3", "9"),
        ("7 // 2", "3"),
        ("7 % 3", "1"),
        ("-2 ** 2", "-4"),
        ("2 ** 10 / 4", "256"),
        ("10 / 3", "3.33333333333"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(pi, 2)", "3.14"),
        ("2 ** 100", "1267650600228229401496703205376"),
    ],
)
def test_it_evaluates_arithmetic(expression, shown):
    assert calculate(expression) == shown


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os').system('ls')", "not allowed in an expression: a call to something other than"),
        ("x + 1", "not allowed in an expression: the name 'x'"),
        ("(1).__class__", "not allowed in an expression: Attribute"),
        ("[1, 2][0]", "not allowed in an expression: Subscript"),
        ("'a' * 3", "not allowed in an expression: the constant 'a'"),
        ("lambda: 1", "not allowed in an expression: Lambda"),
        ("9 ** 9 ** 9", "exponent"),
        ("10 ** 5000", "more than 1000 digits"),
        ("(10 ** 900) * (10 ** 900)", "more than 1000 digits"),
        ("1 / 0", "division by zero"),
        ("sqrt(-1)", "math error"),
        ("2.0 ** 5000", "math error"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 600, "longer than 500 characters"),
    ],
)
def test_it_refuses_what_is_not_bounded_arithmetic(expression, reason):
    with pytest.raises(ToolError, match=None) as caught:
        calculate(expression)
    assert reason in str(caught.value), str(caught.value)


def test_arguments_are_checked_against_the_schema():
    tool = TOOLS.get("calculator").create({}, EpisodeLimits())
    with pytest.raises(ToolError, match="missing argument: expression"):
        tool.call("calculator", {})
    with pytest.raises(ToolError, match="argument 'expression' must be string, got int"):
        tool.call("calculator", {"expression": 3})
    with pytest.raises(ToolError, match="unknown argument 'x'"):
        tool.call("calculator", {"expression": "1", "x": 2})
