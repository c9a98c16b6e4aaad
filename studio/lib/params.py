"""Typed readers for query-string parameters: a wrong value raises `QueryError` naming the
parameter, which views turn into a 400 with that name as the key."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from studio.lib.env import FALSE, TRUE
from studio.lib.errors import FieldErrors

# The largest id and the widest whole number the database holds (a signed 64-bit integer): a
# number past it is refused where it comes in, naming its field, never sent to the database.
MAX_ID = 2**63 - 1
MIN_INT = -(2**63)
_DIGITS = re.compile(r"[0-9]+")


class QueryError(FieldErrors, ValueError):
    """A query parameter refused: `field` names it; the API answers 400 {field: message}."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__({field: message}, message=message)
        self.field = field


def number_param(params: Mapping[str, Any], name: str, cast: Callable[[str], Any] = float) -> Any:
    """`params[name]` as a number (int or float per `cast`), None when absent or empty."""
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        value = cast(raw)
    except (ValueError, OverflowError):
        raise QueryError(name, f"must be a number, got {raw!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise QueryError(name, f"must be a finite number, got {raw!r}")
    if isinstance(value, int) and not MIN_INT <= value <= MAX_ID:
        raise QueryError(name, f"must be between {MIN_INT} and {MAX_ID}")
    return value


def as_id(raw: Any) -> int | None:
    """`raw` (an int or a string of ASCII digits) as an id from 1 to MAX_ID; None for anything else."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str):
        raw = raw.strip()
        if not _DIGITS.fullmatch(raw) or len(raw) > 19:
            return None
        raw = int(raw)
    return raw if isinstance(raw, int) and 1 <= raw <= MAX_ID else None


def id_param(params: Mapping[str, Any], name: str) -> int | None:
    """`params[name]` as an id (1 to MAX_ID), None when absent or empty; a QueryError naming it otherwise."""
    raw = params.get(name)
    if raw in (None, ""):
        return None
    value = as_id(raw)
    if value is None:
        raise QueryError(name, f"must be an id (a whole number from 1 to {MAX_ID}), got {raw!r}")
    return value


def flag_param(params: Mapping[str, Any], name: str) -> bool:
    """`params[name]` as true/false (the words of `studio.lib.env`); absent or empty is false."""
    raw = (params.get(name) or "").strip().lower()
    if raw in TRUE:
        return True
    if raw in FALSE:
        return False
    raise QueryError(name, f"must be true or false, got {params[name]!r}")
