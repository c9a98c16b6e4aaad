"""Bounded arithmetic on a parsed expression (`ast`): the operators that the calculator tool
(`trainers/rollout/environments/tools/calculator.py`) and the reward formula
(`trainers/rewards/formula.py`) accept, and the bounds that keep any expression quick to compute.

Each caller walks its own grammar (the calculator: numbers, pi and e, math functions; the
formula: criterion names, comparisons, conditions) and comes here for the operators, so both
apply the same ones under the same bounds:

- depth: an expression nested deeper than `MAX_DEPTH` levels (or the caller's limit) is refused
  before the walk runs out of stack;
- powers: `int ** int` is refused before it is computed when the exponent is beyond
  ±`MAX_EXPONENT` or the result would have more than `MAX_DIGITS` digits (a big-integer power is
  the one operation whose time grows without bound; a float power overflows at once with
  `OverflowError`);
- results: an integer longer than `MAX_DIGITS` digits, a complex number, and a float that is not
  finite (an overflow that Python lets through as inf, a NaN) are refused.

Refusals raise `BoundsError` (an `ArithmeticError`) saying which bound; each caller turns it into
its own error. Plain Python: nothing here imports the trainers' stages, or torch.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 50
MAX_EXPONENT = 10_000
MAX_DIGITS = 1000  # integers longer than this are refused: beyond any arithmetic a model or a rubric needs

BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


class BoundsError(ArithmeticError):
    """An expression or a result beyond one of the bounds; the message says which."""


def is_number(value: Any) -> bool:
    """An int or a float, the only constants an expression may hold (True and False are not numbers here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_depth(depth: int, max_depth: int = MAX_DEPTH) -> None:
    if depth > max_depth:
        raise BoundsError(f"expression nested deeper than {max_depth} levels")


def binary(op: ast.operator, left: Any, right: Any) -> int | float:
    """`left <op> right` for an operator in `BINARY`: a power is checked before it is computed,
    every result after."""
    if isinstance(op, ast.Pow):
        check_power(left, right)
    return bounded(BINARY[type(op)](left, right))


def check_power(base: Any, exponent: Any) -> None:
    if not (isinstance(base, int) and isinstance(exponent, int)):
        return  # a float power takes constant time: it overflows (OverflowError) or is bounded below
    if abs(exponent) > MAX_EXPONENT:
        raise BoundsError(f"exponent {exponent:g} is beyond ±{MAX_EXPONENT}")
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > MAX_DIGITS:
        raise BoundsError(f"the result would have more than {MAX_DIGITS} digits")


def bounded(value: Any) -> int | float:
    """`value` when it is a real number within the bounds; `BoundsError` saying why otherwise."""
    if isinstance(value, complex):
        raise BoundsError("the result is a complex number")
    if isinstance(value, int) and value.bit_length() > MAX_DIGITS * 3.33:
        raise BoundsError(f"the result would have more than {MAX_DIGITS} digits")
    if isinstance(value, float) and not math.isfinite(value):
        raise BoundsError(f"the result is not a finite number ({value})")
    return value
