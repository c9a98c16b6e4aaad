"""Typed readers for query-string parameters: a wrong value raises `QueryError` naming the
parameter, which views turn into a 400 with that name as the key."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from studio.lib.env import FALSE, TRUE


class QueryError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def number_param(params: Mapping[str, Any], name: str, cast: Callable[[str], Any] = float) -> Any:
    """`params[name]` as a number (int or float per `cast`), None when absent or empty."""
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        return cast(raw)
    except ValueError:
        raise QueryError(name, f"must be a number, got {raw!r}") from None


def flag_param(params: Mapping[str, Any], name: str) -> bool:
    """`params[name]` as true/false (the words of `studio.lib.env`); absent or empty is false."""
    raw = (params.get(name) or "").strip().lower()
    if raw in TRUE:
        return True
    if raw in FALSE:
        return False
    raise QueryError(name, f"must be true or false, got {params[name]!r}")
