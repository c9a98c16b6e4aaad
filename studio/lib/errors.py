"""What a service raises when it refuses a request, and the one DRF exception handler that answers it.

A service (a run action, a launch, an ingested batch...) raises a `Refused` subclass saying why; the API
views let it through and `exception_handler` (REST_FRAMEWORK["EXCEPTION_HANDLER"]) answers its `status`
with its `body()`, so no view repeats a try/except that builds the same error response. The pages call
the same services and show `str(exc)` (or `errors` beside each field) to the user.

Two shapes of body, the ones the API has always answered:
- `{"detail": message}`: the request as a whole is refused (`Refused`, `Conflict`);
- `{field: message}`: each named input is at fault (`FieldErrors`); `listed` ones hold a list of messages
  per field, as a serializer's errors do.
"""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Refused(Exception):
    """A request the studio refuses; the message says why, `status` is the HTTP answer's."""

    status: int = 400

    def __init__(self, message: str = "", *, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status

    def body(self) -> dict[str, Any]:
        return {"detail": str(self)}


class Conflict(Refused):
    """The request is well formed but the state of what it acts on refuses it (a run that has ended...)."""

    status = 409


class FieldErrors(Refused):
    """Refused because of named inputs: `errors` maps a field (dotted for a nested setting) to why."""

    listed = False  # True: answered as a serializer's errors, {"name": ["why"]}

    def __init__(self, errors: dict[str, Any], *, status: int | None = None, message: str | None = None) -> None:
        super().__init__(message if message is not None else joined(errors), status=status)
        self.errors = errors

    def body(self) -> dict[str, Any]:
        if not self.listed:
            return dict(self.errors)
        return {k: [v] if isinstance(v, str) else v for k, v in self.errors.items()}


def joined(errors: dict[str, Any]) -> str:
    """{field: why} as one line, "field: why; other: why" (what a page shows when it has no field to put it by)."""
    return "; ".join(f"{k}: {v}" for k, v in errors.items())


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, answering a `Refused` with its status and body (anything else as DRF does)."""
    if isinstance(exc, Refused):
        return Response(exc.body(), status=exc.status)
    return drf_exception_handler(exc, context)
