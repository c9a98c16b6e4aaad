"""What pages need to validate through the API's serializers, so a rule lives in one place."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


class _Request:
    """What the API serializers read from `context["request"]`."""

    def __init__(self, request: HttpRequest) -> None:
        self.user = request.user


def serializer_context(request: HttpRequest) -> dict[str, Any]:
    return {"request": _Request(request)}


def flat_errors(detail: Any, prefix: str = "") -> dict[str, str]:
    """A serializer's nested errors as {"a.b.c": "message"}, the keys the forms show them under."""
    if isinstance(detail, dict):
        out: dict[str, str] = {}
        for key, value in detail.items():
            nested = not isinstance(value, (str, list))
            out.update(flat_errors(value, f"{prefix}{key}." if nested else f"{prefix}{key}"))
        return out
    if isinstance(detail, list):
        return {prefix.rstrip("."): " ".join(str(v) for v in detail)}
    return {prefix.rstrip("."): str(detail)}
