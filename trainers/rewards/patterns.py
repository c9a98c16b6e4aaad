"""User regular expressions: compiled by the `regex` engine, run under a time limit, and checked
for the nested quantifiers that make backtracking catastrophic.

A pattern like `(a+)+$` takes exponential time on 'aaaa…b': on a long completion it would hold
the scoring worker for minutes. The `regex` package (a drop-in for `re`) can stop a match after a
timeout, so such a pattern ends as one criterion error instead. Imports without torch.
"""

from __future__ import annotations

import re
import re._parser as sre_parse  # the stdlib's own parser: the pattern's tree, not a guess from its text
from collections.abc import Iterator

import regex

# Seconds one search may take on one completion before it is abandoned.
DEFAULT_TIMEOUT_S = 1.0
_REPEATS = (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, sre_parse.POSSESSIVE_REPEAT)


class PatternTimeout(TimeoutError):
    """A pattern ran past its time limit on one completion."""

    def __init__(self, timeout_s: float, text: str) -> None:
        super().__init__(f"pattern timed out after {timeout_s:g} s on a {len(text):,}-char completion")


def compile_pattern(pattern: str, flags: int = 0) -> regex.Pattern:
    """The pattern compiled by `regex` (re's flags are accepted); `ValueError` saying why it is invalid."""
    try:
        return regex.compile(pattern, flags)
    except regex.error as exc:
        raise ValueError(f"invalid regular expression: {exc}") from None


def search(compiled: regex.Pattern, text: str, timeout_s: float, *, whole: bool = False) -> regex.Match | None:
    """`compiled.search(text)` (or `fullmatch` when `whole`), abandoned after `timeout_s`: `PatternTimeout`."""
    try:
        if whole:
            return compiled.fullmatch(text, timeout=timeout_s)
        return compiled.search(text, timeout=timeout_s)
    except TimeoutError:
        raise PatternTimeout(timeout_s, text) from None


def last_match(pattern: str, text: str, flags: int, timeout_s: float) -> regex.Match | None:
    """The last match of `pattern` in `text`; the time limit covers the whole scan."""
    last = None
    try:
        for last in compile_pattern(pattern, flags).finditer(text, timeout=timeout_s):  # noqa: B007
            pass
    except TimeoutError:
        raise PatternTimeout(timeout_s, text) from None
    return last


def nested_quantifiers(pattern: str) -> list[str]:
    """Parts of `pattern` where a repeated group holds another unbounded repeat, like `(a+)+`,
    `(.*)*` or `(\\w+\\s?)*`: on text that almost matches, backtracking tries every way to split it.
    Empty for a pattern without them (or one `re` cannot parse; `compile_pattern` says why)."""
    try:
        tree = sre_parse.parse(pattern)
    except re.error:
        return []
    return [f"`{_show(inner)}` inside a group repeated by `{_show(outer)}`" for outer, inner in _nested(tree, None)]


def warnings_for(pattern: str) -> list[str]:
    """What to tell the person saving `pattern` (a warning, not a refusal: it may be fine on short text)."""
    found = nested_quantifiers(pattern)
    if not found:
        return []
    return [
        f"pattern {pattern!r} nests quantifiers ({'; '.join(found)}): on a long completion that almost matches it "
        "can backtrack for a very long time (it is stopped after its timeout and scores 0 with an error); "
        "make the inner part match one way only, e.g. (a+)+ -> a+"
    ]


def _nested(items, outer) -> Iterator[tuple[object, object]]:
    """(outer repeat, inner repeat) pairs: an unbounded repeat inside a repeat that can run more than once."""
    for op, av in items:
        if op in _REPEATS:
            low, high, body = av
            if outer is not None and high == sre_parse.MAXREPEAT:
                yield outer, (op, av)
                continue
            yield from _nested(body, (op, av) if high > 1 else outer)
        elif op == sre_parse.SUBPATTERN:
            yield from _nested(av[-1], outer)
        elif op == sre_parse.BRANCH:
            for branch in av[1]:
                yield from _nested(branch, outer)


def _show(repeat) -> str:
    """A short label for a repeat node: its bounds as a quantifier."""
    _op, (low, high, _body) = repeat
    if high == sre_parse.MAXREPEAT:
        return {0: "*", 1: "+"}.get(low, f"{{{low},}}")
    return "?" if (low, high) == (0, 1) else f"{{{low},{high}}}"
