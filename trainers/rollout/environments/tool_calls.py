"""Tool calls parsed from a model turn, in the formats chat templates use.

- `hermes`: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen2.5/Qwen3 templates,
  Hermes). Several calls in one turn are allowed.
- `python`: a fenced code block (```python ... ```) run by the `python` tool, as ReTool and
  rStar2-Agent prompt for.

A call that cannot be read (bad JSON, no name) comes back with `error` set, so the model is told
what was wrong and the episode goes on; `well_formed` says whether every call in the turn was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from trainers.episodes import ToolCall

FORMATS = ("hermes", "python")

_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:python|py)[ \t]*\n(.*?)(?:```|$)", re.DOTALL)


def _hermes_call(body: str) -> ToolCall:
    text = body.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return ToolCall(name="", arguments={}, error=f"malformed tool call: not JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return ToolCall(name="", arguments={}, error='malformed tool call: expected {"name": ..., "arguments": {...}}')
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):  # some templates send the arguments JSON-encoded
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return ToolCall(name=data["name"], arguments={}, error="malformed tool call: arguments are not JSON")
    if not isinstance(arguments, dict):
        return ToolCall(name=data["name"], arguments={}, error="malformed tool call: arguments must be an object")
    return ToolCall(name=data["name"], arguments=arguments)


def parse_tool_calls(text: str, formats: Sequence[str] = FORMATS) -> list[ToolCall]:
    """The calls in `text`, in the order they appear; [] when the turn calls no tool.
    An unclosed `<tool_call>` or code fence at the end of the turn (the model stopped on a stop
    string, or ran out of tokens) is read up to the end of the text."""
    found: list[tuple[int, ToolCall]] = []
    if "hermes" in formats:
        found += [(m.start(), _hermes_call(m.group(1))) for m in _HERMES.finditer(text)]
    if "python" in formats:
        found += [(m.start(), ToolCall(name="python", arguments={"code": m.group(1)})) for m in _FENCED.finditer(text)]
    return [call for _, call in sorted(found, key=lambda pair: pair[0])]


def well_formed(calls: Sequence[ToolCall]) -> bool:
    """At least one call, and none malformed."""
    return bool(calls) and all(not (c.error or "").startswith("malformed") for c in calls)
