"""Tool calls parsed from a model turn, in the formats chat templates use.

- `hermes`: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen2.5/Qwen3 templates,
  Hermes). Several calls in one turn are allowed.
- `python`: a fenced code block (```python ... ```) run by the `python` tool, as ReTool and
  rStar2-Agent prompt for.

A call that cannot be read (bad JSON, no name) comes back with `error` set, so the model is told
what was wrong and the episode goes on; `well_formed` says whether every call in the turn was.
What the model wrote is bounded before it is used (`bounds.json_value`): JSON nested deeper than
`MAX_JSON_DEPTH`, an integer of more than `MAX_INT_DIGITS` digits, NaN or Infinity are malformed
calls; lone surrogates (`"\\ud800"`) in a name or an argument become U+FFFD.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from trainers.episodes import ToolCall
from trainers.rollout.environments import bounds

FORMATS = ("hermes", "python")

_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:python|py)[ \t]*\n(.*?)(?:```|$)", re.DOTALL)


class _Refused(ValueError):
    """JSON the parser will not read (too deep, too long a number, NaN / Infinity)."""


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > bounds.MAX_INT_DIGITS:
        raise _Refused(f"an integer of more than {bounds.MAX_INT_DIGITS} digits")
    return int(digits)


def _refused_constant(name: str) -> float:
    raise _Refused(f"{name} is not a number JSON allows")


def _depth(text: str) -> int:
    """How deep `[`/`{` nest in JSON text (outside strings), in one pass: checked before parsing
    so a 100,000-deep array is refused without recursing into it."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _load(text: str) -> object:
    """`json.loads` within bounds; `_Refused` or `json.JSONDecodeError` saying why not."""
    if _depth(text) > bounds.MAX_JSON_DEPTH:
        raise _Refused(f"nested deeper than {bounds.MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_int=_bounded_int, parse_constant=_refused_constant)
    except RecursionError:
        raise _Refused(f"nested deeper than {bounds.MAX_JSON_DEPTH} levels") from None


def _hermes_call(body: str) -> ToolCall:
    text = body.strip()
    try:
        data = _load(text)
    except json.JSONDecodeError as exc:
        return ToolCall(name="", arguments={}, error=f"malformed tool call: not JSON ({exc.msg} at char {exc.pos})")
    except _Refused as exc:
        return ToolCall(name="", arguments={}, error=f"malformed tool call: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return ToolCall(name="", arguments={}, error='malformed tool call: expected {"name": ..., "arguments": {...}}')
    name = bounds.short(data["name"], bounds.MAX_NAME_CHARS)
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):  # some templates send the arguments JSON-encoded
        try:
            arguments = _load(arguments)
        except (json.JSONDecodeError, _Refused):
            return ToolCall(name=name, arguments={}, error="malformed tool call: arguments are not JSON")
    if not isinstance(arguments, dict):
        return ToolCall(name=name, arguments={}, error="malformed tool call: arguments must be an object")
    try:
        arguments = bounds.json_value(arguments, "the arguments")
    except (TypeError, ValueError) as exc:
        return ToolCall(name=name, arguments={}, error=f"malformed tool call: {exc}")
    return ToolCall(name=name, arguments=arguments)


def parse_tool_calls(text: str, formats: Sequence[str] = FORMATS) -> list[ToolCall]:
    """The calls in `text`, in the order they appear; [] when the turn calls no tool.
    An unclosed `<tool_call>` or code fence at the end of the turn (the model stopped on a stop
    string, or ran out of tokens) is read up to the end of the text."""
    found: list[tuple[int, ToolCall]] = []
    if "hermes" in formats:
        found += [(m.start(), _hermes_call(m.group(1))) for m in _HERMES.finditer(text)]
    if "python" in formats:
        found += [
            (m.start(), ToolCall(name="python", arguments={"code": bounds.clean(m.group(1))}))
            for m in _FENCED.finditer(text)
        ]
    return [call for _, call in sorted(found, key=lambda pair: pair[0])]


def malformed(call: ToolCall) -> bool:
    """The call could not be read (its error says "malformed ..."), as opposed to one that ran and failed."""
    return (call.error or "").startswith("malformed")


def well_formed(calls: Sequence[ToolCall]) -> bool:
    """At least one call, and none malformed."""
    return bool(calls) and not any(malformed(c) for c in calls)
