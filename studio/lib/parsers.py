"""The studio's JSON request parser: DRF's, within the limits of studio.lib.json_limits.

Named first in REST_FRAMEWORK's DEFAULT_PARSER_CLASSES, and by every view that lists its own parsers.
A body past a limit answers 400 `{"detail": "...", "limit": "size" | "depth" | "number"}`.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding

from studio.lib import json_limits


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        encoding = get_encoding(parser_context or {})
        limit = json_limits.max_bytes()
        # One byte past the limit is enough to know: a larger body is never held in memory whole.
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise ParseError({"detail": str(json_limits.too_large(limit)), "limit": "size"})
        try:
            return json_limits.loads(raw.decode(encoding))
        except json_limits.JSONLimitError as exc:
            raise ParseError({"detail": str(exc), "limit": exc.limit}) from None
        except ValueError as exc:  # not JSON, or not in its charset
            raise ParseError(f"JSON parse error - {exc}") from None
