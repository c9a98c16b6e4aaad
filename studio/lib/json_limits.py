"""JSON from a request, read within limits: its size, how deeply it nests, and finite numbers only.

Python's parser recurses once per level, so a body nested 100,000 levels deep raised RecursionError
(a 500) wherever request data was parsed; and it reads `1e999` as infinity and `NaN` as NaN, which
pass a serializer and then fail the database's JSON check (another 500). Every place that parses
request data goes through `loads` (or `BoundedJSONDecoder`, for `json.loads(..., cls=...)`):

- the size is checked first (settings.JSON_MAX_BYTES);
- the depth is counted on the text before it is parsed, so no limit of Python's is ever reached;
- NaN, Infinity, -Infinity and numbers too large for a float (1e999) are refused while parsing.

A refusal is a `JSONLimitError` (a ValueError, so code that already turns bad JSON into a 400 keeps
doing so) that names the limit: `limit` is "size", "depth" or "number".

`find_non_finite` finds an infinite or NaN float in a value built some other way (settings validated
by a schema that reads the string "inf" as a float), before it is stored.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django.conf import settings

# A JSON string (escapes included) and runs of brackets; strings are removed before brackets are counted.
STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
BRACKETS = re.compile(r"[\[{]+|[\]}]+")


class JSONLimitError(ValueError):
    """JSON refused by a limit; `limit` names it ("size", "depth" or "number")."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


def max_depth() -> int:
    return settings.JSON_MAX_DEPTH


def max_bytes() -> int:
    return settings.JSON_MAX_BYTES


def too_large(limit: int) -> JSONLimitError:
    return JSONLimitError("size", f"the JSON is larger than the limit of {limit:,} bytes (STUDIO_JSON_MAX_MB)")


def check_depth(text: str, limit: int) -> None:
    """Refuse text whose arrays and objects nest deeper than `limit`, counted without parsing it."""
    depth = 0
    for run in BRACKETS.finditer(STRING.sub("", text)):
        brackets = run.group()
        if brackets[0] in "[{":
            depth += len(brackets)
            if depth > limit:
                raise JSONLimitError("depth", f"the JSON nests deeper than {limit} levels (STUDIO_JSON_MAX_DEPTH)")
        else:
            depth -= len(brackets)


def _refuse_constant(name: str) -> None:
    raise JSONLimitError("number", f"{name} is not a number JSON can store: send a finite number or null")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONLimitError("number", f"{text[:40]} is too large for a number: send a finite number or null")
    return value


def loads(text: str | bytes, *, depth: int | None = None, size: int | None = None) -> Any:
    """json.loads within the limits (the settings' unless given); JSONLimitError names the one exceeded,
    json.JSONDecodeError says where other text is not JSON."""
    return json.loads(text, cls=BoundedJSONDecoder, max_depth=depth, max_size=size)


class BoundedJSONDecoder(json.JSONDecoder):
    """A JSONDecoder within the limits, for APIs that take a decoder class (DRF's JSONField)."""

    def __init__(self, *, max_depth: int | None = None, max_size: int | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("parse_constant", _refuse_constant)
        kwargs.setdefault("parse_float", _finite_float)
        super().__init__(**kwargs)
        self.max_depth = max_depth
        self.max_size = max_size

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        size_limit = max_bytes() if self.max_size is None else self.max_size
        # A character is at least one byte, so only text that could be too large is encoded to measure it.
        if len(s) > size_limit // 4 and len(s.encode("utf-8", "surrogatepass")) > size_limit:
            raise too_large(size_limit)
        check_depth(s, max_depth() if self.max_depth is None else self.max_depth)
        try:
            return super().decode(s, *args, **kwargs)
        except RecursionError:  # not reached past check_depth; kept so that no depth is ever a 500
            raise JSONLimitError("depth", "the JSON nests too deeply (STUDIO_JSON_MAX_DEPTH)") from None


NOT_FINITE = 'not a finite number: JSON stores no Infinity or NaN (a text like "inf" reads as one)'


def non_finite_errors(value: Any) -> dict[str, str]:
    """{path: why} for the first infinite or NaN float in a validated value, or {}: a schema that
    reads the text "inf" as a float passes it, and the database's JSON check would then fail."""
    where = find_non_finite(value)
    return {} if where is None else {where: NOT_FINITE}


def find_non_finite(value: Any, path: str = "") -> str | None:
    """The path ("lr", "tools[2].x") of the first infinite or NaN float in a value of dicts and lists,
    or None. Walks with a stack of its own: a value may nest as deeply as it was built."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where or "the value"
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
    return None
