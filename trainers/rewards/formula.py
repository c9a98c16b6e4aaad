"""Safe arithmetic over criterion scores, for `RubricSpec.combine == "formula"`.

The formula is parsed with `ast` and every node is checked against a whitelist before
anything is evaluated; nothing reaches `eval`. Allowed: numbers, criterion names,
+ - * / // % **, unary + -, comparisons (True/False count as 1/0), `a if cond else b`,
and / or / not, and the functions min, max, abs, clip(x, lo, hi).
All arithmetic is on floats, so `10 ** 10 ** 10` overflows at once instead of building a huge int.
The operators and their bounds (nesting depth, finite results) are `trainers.rewards.arithmetic`'s, shared
with the calculator tool.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable

from trainers.rewards.arithmetic import BINARY, COMPARE, UNARY, BoundsError, binary, check_depth, is_number

MAX_LENGTH = 2000
MAX_DEPTH = 200  # a sum of 200 criteria nests 200 deep; building and evaluating stay far from the recursion limit


class FormulaError(ValueError):
    """The formula is malformed, uses something not allowed, or cannot be evaluated."""


def _clip(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


FUNCTIONS: dict[str, tuple[Callable[..., float], int | None]] = {
    # name: (function, exact argument count or None for "two or more")
    "min": (min, None),
    "max": (max, None),
    "abs": (abs, 1),
    "clip": (_clip, 3),
}

Evaluator = Callable[[dict[str, float]], float]


def validate_formula(formula: str, names: Iterable[str]) -> None:
    """Raise `FormulaError` unless `formula` is well-formed and uses only `names` and allowed functions.
    For the studio to check a rubric before saving it."""
    compile_formula(formula, names)


def compile_formula(formula: str, names: Iterable[str]) -> Evaluator:
    """Check `formula` once and return a function from {criterion name: score} to the reward."""
    allowed = list(names)
    if not formula or not formula.strip():
        raise FormulaError("the formula is empty")
    if len(formula) > MAX_LENGTH:
        raise FormulaError(f"the formula is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(formula.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"invalid formula at column {exc.offset}: {exc.msg}") from None
    try:
        body = _build(tree.body, set(allowed), allowed, 0)
    except BoundsError as exc:
        raise FormulaError(f"the formula is not allowed: {exc}") from None

    def evaluate(scores: dict[str, float]) -> float:
        try:
            value = float(body(scores))
        except (ArithmeticError, ValueError, TypeError) as exc:
            raise FormulaError(f"formula {formula!r} failed: {type(exc).__name__}: {exc}") from None
        if not math.isfinite(value):
            raise FormulaError(f"formula {formula!r} gave {value}")
        return value

    return evaluate


def _build(node: ast.AST, names: set[str], ordered: list[str], depth: int) -> Callable[[dict[str, float]], float]:
    """Turn one checked node into a closure; anything outside the whitelist raises FormulaError."""
    check_depth(depth, MAX_DEPTH)

    def build(child: ast.AST) -> Callable[[dict[str, float]], float]:
        return _build(child, names, ordered, depth + 1)

    if isinstance(node, ast.Constant):
        if not is_number(node.value):
            raise FormulaError(f"only numbers are allowed as constants, not {node.value!r}")
        value = float(node.value)
        return lambda scores: value
    if isinstance(node, ast.Name):
        if node.id not in names:
            valid = ", ".join(ordered) or "none"
            raise FormulaError(f"unknown name {node.id!r} in formula; criterion names: {valid}")
        key = node.id
        return lambda scores: scores[key]
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        bop, left, right = node.op, build(node.left), build(node.right)
        return lambda scores: binary(bop, left(scores), right(scores))
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        uop, operand = UNARY[type(node.op)], build(node.operand)
        return lambda scores: uop(operand(scores))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        operand = build(node.operand)
        return lambda scores: float(not operand(scores))
    if isinstance(node, ast.BoolOp):
        parts = [build(v) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda scores: float(all(p(scores) for p in parts))
        return lambda scores: float(any(p(scores) for p in parts))
    if isinstance(node, ast.Compare) and all(type(op) in COMPARE for op in node.ops):
        first = build(node.left)
        rest = [(COMPARE[type(op)], build(c)) for op, c in zip(node.ops, node.comparators, strict=True)]
        return lambda scores: float(_chain(first(scores), rest, scores))
    if isinstance(node, ast.IfExp):
        test, yes, no = (build(n) for n in (node.test, node.body, node.orelse))
        return lambda scores: yes(scores) if test(scores) else no(scores)
    if isinstance(node, ast.Call):
        return _build_call(node, build)
    raise FormulaError(f"{type(node).__name__} is not allowed in a formula: {ast.unparse(node)!r}")


def _build_call(
    node: ast.Call, build: Callable[[ast.AST], Callable[[dict[str, float]], float]]
) -> Callable[[dict[str, float]], float]:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        raise FormulaError(f"unknown function {ast.unparse(node.func)!r}; allowed: {', '.join(FUNCTIONS)}")
    if node.keywords:
        raise FormulaError(f"{node.func.id}() takes no keyword arguments")
    fn, arity = FUNCTIONS[node.func.id]
    if (arity is None and len(node.args) < 2) or (arity is not None and len(node.args) != arity):
        wanted = "at least 2" if arity is None else str(arity)
        raise FormulaError(f"{node.func.id}() takes {wanted} arguments, got {len(node.args)}")
    args = [build(a) for a in node.args]
    return lambda scores: fn(*(a(scores) for a in args))


def _chain(left: float, rest: list[tuple[Callable[[float, float], bool], Callable]], scores: dict[str, float]) -> bool:
    for op, right_fn in rest:
        right = right_fn(scores)
        if not op(left, right):
            return False
        left = right
    return True
