"""`{{ value|json_text }}`: a tool call's arguments as the model wrote them (JSON); `{{ turn|new_observation }}`:
the observation messages a turn's tool-call boxes do not already show."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@register.filter
def new_observation(turn: dict[str, Any]) -> list[dict[str, Any]]:
    """The turn's observation less the tool messages that carry a result or error its calls already show: each
    is shown once, in its call's box (issue 39: a "Try it" error appeared three times, a result twice)."""
    texts = [str(c.get("error") or c.get("result") or "").strip() for c in turn.get("tool_calls") or []]
    texts = [t for t in texts if t]
    return [
        m for m in turn.get("observation") or []
        if not (m.get("role") == "tool" and any(t in str(m.get("content") or "") for t in texts))
    ]  # fmt: skip
