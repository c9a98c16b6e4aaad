"""The API's list pages: `?limit=` (1 to MAX_LIMIT, larger asks are capped) and `?offset=`; a value
that is not a whole number answers 400 naming the parameter, where DRF's own paging would quietly
use its default (and, with no cap, send a limit past 64 bits to the database)."""

from __future__ import annotations

from django.conf import settings
from rest_framework import pagination
from rest_framework.exceptions import ValidationError

from studio.lib.params import MAX_ID, QueryError, number_param

MAX_LIMIT = 1000


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request) -> int:
        limit = self._whole(request, self.limit_query_param, 1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request) -> int:
        return self._whole(request, self.offset_query_param, 0) or 0

    def _whole(self, request, name: str, least: int) -> int | None:
        try:
            value = number_param(request.query_params, name, int)
        except QueryError as exc:
            raise ValidationError({exc.field: [str(exc)]}) from None
        if value is not None and not least <= value <= MAX_ID:
            raise ValidationError({name: [f"must be a whole number from {least} to {MAX_ID}"]})
        return value

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: {"minimum": 1}, self.offset_query_param: {"minimum": 0}}
        for parameter in parameters:
            parameter["schema"] = {**parameter["schema"], **bounds.get(parameter["name"], {}), "maximum": MAX_ID}
            if parameter["name"] == self.limit_query_param:
                parameter["description"] = (
                    f"Number of results to return per page (default {settings.REST_FRAMEWORK['PAGE_SIZE']}, "
                    f"at most {MAX_LIMIT}: a larger limit is capped)."
                )
        return parameters
