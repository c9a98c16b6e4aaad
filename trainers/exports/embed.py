"""User text (run names, criterion names, dataset fields, setting values) put into a generated file as
data, never as code: each kind of place in a file gets one way in, and no value can end the place it is
put (close a docstring, start a line of YAML, become a keyword).

- `docstring(text)`: a triple-quoted Python literal whose value is exactly `text` (backslashes and
  quotes escaped, so no `\"\"\"` inside can close it; control characters, line breaks other than \\n
  and lone surrogates written as escapes, so the file stays valid UTF-8 source).
- `literal(value)`: a JSON-like value (str, int, float, bool, None, lists, dicts) as a Python literal,
  laid out by pprint; a non-finite float is written `float('inf')` (pprint's `inf` is no literal).
- `identifier(name, taken)`: a Python function name made from `name`: ASCII letters, digits and `_`,
  never a keyword, never one already in `taken`.
- `comment(text, prefix)`: text as comment lines; every character a YAML or Python reader would
  take for a line break (\\r, NEL, U+2028, U+2029...) is escaped, so the text cannot leave the comment.
"""

from __future__ import annotations

import keyword
import math
import pprint
import re
from typing import Any

# Characters escaped inside a docstring: controls but \n and \t, the line breaks Python's tokenizer
# or a YAML reader would see (\r, \x85, U+2028, U+2029), and lone surrogates (not encodable as UTF-8).
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\ud800-\udfff]")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")
# In a comment: \n starts a new comment line; other line breaks, controls (C1 too) and what YAML
# refuses anywhere in a stream (U+FEFF, U+FFFE/F) are escaped in place.
_BREAKS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def docstring(text: str, indent: str = "") -> str:
    """`text` as a triple-quoted literal; `ast.literal_eval` of it gives `text` back, whatever it holds."""
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'{indent}"""{_UNSAFE.sub(_escape, body)}"""'


class _Call:
    """A value pprint writes as the given source (a float Python has no literal for)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __repr__(self) -> str:
        return self.source


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return _Call(f"float({str(value)!r})")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"{type(value).__name__} is not a JSON-like value to write into a generated file")


def literal(value: Any, *, indent: int = 4, width: int = 110) -> str:
    """A JSON-like `value` as Python source that evaluates to an equal value (strings as repr literals)."""
    return pprint.pformat(_plain(value), indent=indent, width=width, sort_dicts=False)


def identifier(name: Any, taken: set[str] | None = None, fallback: str = "criterion") -> str:
    """A Python identifier made from `name` (added to `taken`): never a keyword or a name taken already."""
    out = _NOT_NAME.sub("_", str(name)) or fallback
    if out[0].isdigit() or keyword.iskeyword(out) or keyword.issoftkeyword(out):
        out = f"{fallback}_{out}"
    taken = set() if taken is None else taken
    unique, n = out, 2
    while unique in taken:
        unique, n = f"{out}_{n}", n + 1
    taken.add(unique)
    return unique


def comment(text: str, prefix: str = "# ") -> list[str]:
    """`text` as comment lines (one per \\n), each starting with `prefix`; no character of it can end the
    comment (other line breaks and controls are written as escapes)."""
    return [f"{prefix}{_BREAKS.sub(_escape, line)}".rstrip() for line in text.split("\n")]
