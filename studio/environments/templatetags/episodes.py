"""`{{ value|json_text }}`: a tool call's arguments as the model wrote them (JSON)."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
