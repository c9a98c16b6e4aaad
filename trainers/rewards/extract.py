"""Pulling the answer (or the code) out of a completion. Shared by exact_match, math_equiv and code_exec."""

from __future__ import annotations

import re

from trainers.rewards.patterns import DEFAULT_TIMEOUT_S, last_match

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


class NotFound(ValueError):
    """The completion holds no answer of the requested shape (its message says which)."""


def last_boxed(text: str) -> str:
    r"""Content of the last `\boxed{...}` (or `\fbox{...}`), braces balanced."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        raise NotFound("no \\boxed{...} in the completion")
    open_at = text.find("{", start)
    if open_at < 0:
        raise NotFound("\\boxed without braces")
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    raise NotFound("unbalanced braces in \\boxed{...}")


def last_line(text: str) -> str:
    """The last non-blank line."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise NotFound("the completion is empty")
    return lines[-1]


def after_marker(text: str, marker: str) -> str:
    """Text after the last occurrence of `marker`, up to the end of that line."""
    at = text.rfind(marker)
    if at < 0:
        raise NotFound(f"marker {marker!r} not in the completion")
    rest = text[at + len(marker) :].strip()
    return rest.splitlines()[0] if rest else ""


def first_group(text: str, pattern: str) -> str:
    """The first group of the last match of `pattern` (the whole match when it has no group).
    A user pattern: it runs under the regex time limit (`PatternTimeout`)."""
    last = last_match(pattern, text, re.DOTALL, DEFAULT_TIMEOUT_S)
    if last is None:
        raise NotFound(f"pattern {pattern!r} does not match the completion")
    return last.group(1) if last.re.groups else last.group(0)


def last_number(text: str) -> str:
    """The last number in the text, thousands separators dropped."""
    numbers = _NUMBER.findall(text)
    if not numbers:
        raise NotFound("no number in the completion")
    return numbers[-1].replace(",", "")


def extract_answer(text: str, how: str, marker: str = "", pattern: str = "") -> str:
    """The part of `text` an answer check compares: `how` is full | last_line | boxed | after_marker | regex | last_number."""
    if how == "full":
        return text
    if how == "last_line":
        return last_line(text)
    if how == "boxed":
        return last_boxed(text)
    if how == "after_marker":
        return after_marker(text, marker)
    if how == "regex":
        return first_group(text, pattern)
    if how == "last_number":
        return last_number(text)
    raise ValueError(f"unknown extraction {how!r}")


def extract_code(text: str, how: str) -> str:
    """The program in a completion: the last fenced block (preferring python-tagged ones), or all of it."""
    if how == "full":
        return text
    blocks = _FENCE.findall(text)
    if not blocks:
        raise NotFound("no ```fenced``` code block in the completion")
    python_blocks = [code for lang, code in blocks if lang.lower() in ("python", "py", "python3")]
    return (python_blocks or [code for _, code in blocks])[-1]
