"""The OpenAPI schema's shared parts: the error answers every operation can give, added to each
operation by `StudioAutoSchema` from what the operation takes, so no view repeats them.

- 400 `FieldErrors`: {field: message(s)}, the field dotted for nested settings ("config.model"),
  for every operation that reads a body or query parameters;
- 403 `Error`: not signed in, or a role in the team too low for the operation;
- 404 `Error`: an id in the path that names nothing this user may see.

An operation documents its other answers (409, 502, 504...) with @extend_schema, or, for answers
that views of one base class share, in the view's `error_responses`."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from studio.lib.params import MAX_ID


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong.")


FIELD_ERRORS = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="The request is refused: each key names a field (dotted for a nested setting, e.g. "
    '"config.model"; "detail" or "non_field_errors" for the whole request) and holds why, as a message '
    "or a list of messages (nested objects for nested fields).",
)
ERROR_403 = OpenApiResponse(ErrorSerializer, description="Not signed in, or your role cannot do this.")
ERROR_404 = OpenApiResponse(ErrorSerializer, description="Nothing with this id that you may see.")
NO_403 = ("/api/token/",)  # signing in: open to all, refuses with 400


def error(description: str) -> OpenApiResponse:
    """An {"detail": ...} answer with its own description (409, 502, 504...)."""
    return OpenApiResponse(ErrorSerializer, description=description)


def id_parameter(name: str, description: str, location: str = OpenApiParameter.QUERY) -> OpenApiParameter:
    return OpenApiParameter(
        name, {"type": "integer", "minimum": 1, "maximum": MAX_ID}, location, description=description
    )


SHARE = OpenApiParameter("share", str, description="A live share link's token: read without signing in.")


class StudioAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code, response in self._errors().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(response, code, direction=direction)
        return responses

    def _errors(self) -> dict[str, OpenApiResponse]:
        # A view's own: {action or lower-case method: {code: response}} in `error_responses`.
        own = getattr(self.view, "error_responses", {})
        out = {} if self.path in NO_403 else {"403": ERROR_403}
        out.update(own.get(getattr(self.view, "action", None) or self.method.lower(), {}))
        if "{" in self.path:
            out["404"] = ERROR_404
        takes_body = self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None
        if takes_body or any(p.get("in") == "query" for p in self._get_parameters()):
            out["400"] = FIELD_ERRORS
        return dict(sorted(out.items()))
