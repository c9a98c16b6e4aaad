"""calculator: arithmetic on numbers, evaluated by walking the parsed expression.

Nothing is `eval`ed: the expression is parsed with `ast` and only numbers, + - * / // % **,
unary signs, parentheses, the constants pi and e and a few math functions are accepted; any
other node (a name, an attribute, a subscript, a lambda) is refused with what it was. The
operators, the nesting limit and the bounds on every intermediate result (`MAX_DIGITS`,
`MAX_EXPONENT`) are `trainers.rewards.arithmetic`'s, shared with the reward formula, so no expression can
run long or fill memory: this runs in the calling process, not in the sandbox.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any

from trainers.rewards.arithmetic import BINARY, MAX_DEPTH, UNARY, BoundsError, binary, bounded, check_depth, is_number
from trainers.rollout.environments.catalog import CalculatorParams
from trainers.rollout.environments.tools.base import TOOLS, FunctionTool, ToolError

MAX_LENGTH = 500
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
}
CONSTANTS = {"pi": math.pi, "e": math.e}


def evaluate(expression: str) -> int | float:
    """The value of `expression`; `ToolError` saying why for anything else."""
    if len(expression) > MAX_LENGTH:
        raise ToolError(f"expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from None
    try:
        return _value(tree.body, 0)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except BoundsError as exc:
        raise ToolError(str(exc)) from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise ToolError(f"math error: {exc}") from None


def _value(node: ast.AST, depth: int) -> int | float:
    """The value of one node; `BoundsError` (from `trainers.rewards.arithmetic`) past a bound."""
    check_depth(depth, MAX_DEPTH)
    if isinstance(node, ast.Constant) and is_number(node.value):
        return bounded(node.value)
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return UNARY[type(node.op)](_value(node.operand, depth + 1))
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        return binary(node.op, _value(node.left, depth + 1), _value(node.right, depth + 1))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
        if node.keywords or len(node.args) > 2:
            raise ToolError(f"{node.func.id}() takes one or two numbers")
        return bounded(FUNCTIONS[node.func.id](*(_value(a, depth + 1) for a in node.args)))
    raise ToolError(f"not allowed in an expression: {_describe(node)}")


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"the name {node.id!r} (known: {', '.join([*CONSTANTS, *FUNCTIONS])})"
    if isinstance(node, ast.Call):
        return "a call to something other than " + ", ".join(FUNCTIONS)
    if isinstance(node, ast.Constant):
        return f"the constant {node.value!r}"
    return type(node).__name__


def show(value: int | float) -> str:
    """Integers exactly; floats to 12 significant digits (what a pocket calculator shows)."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12g}"


# Shaped as a placeholder, not as a value: given "For example: (3 + 4.5) * 2 ** 10", the real model copied
# that expression into its calls instead of the question's numbers (issue 39). A copied "A * (B + C)"
# is refused with the name it holds, which the model reads in the tool's reply.
EXPRESSION_HELP = "The arithmetic to evaluate, written with the question's own numbers in place of A, B, C: A * (B + C)"


@TOOLS.register("calculator")
class Calculator(FunctionTool):
    params_model = CalculatorParams
    name = CalculatorParams.offers
    description = (
        "Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses, "
        f"the constants pi and e, and the functions {', '.join(FUNCTIONS)}."
    )
    parameters = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": EXPRESSION_HELP}},
        "required": ["expression"],
    }

    def run(self, arguments: dict[str, Any]) -> str:
        return show(evaluate(arguments["expression"]))
