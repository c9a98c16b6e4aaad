"""A rollout's text fields: prompt and completion (text or a list of {role, content} messages), a
hinted retry's hint (text: the start of a reference solution, as long as the dataset's), and a
multi-turn episode's turns, whose texts are each turn's `text`, each tool call's `result` and
`error`, and each observation message's `content` (tool arguments are small JSON, kept whole).

API answers carry at most TEXT_CAP characters of each message (a text field is one message) and
say what was cut; the rest is read in windows of the same shape (`window`), so a multi-MB prompt
never travels whole unless asked for, and then in pages.
"""

from __future__ import annotations

from typing import Any

TEXT_CAP = 20_000  # characters per message in a rollout answer (the detail and its group)
WINDOW_MAX = 1_000_000  # the most characters per message one full-text page may ask for
FIELDS = ("prompt", "completion", "turns", "hint")


def parts(value: Any) -> list[str]:
    """The texts a field holds: itself when text, each message's content when a list."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [_content(item) for item in value]
    return [str(value)]


def _content(item: Any) -> str:
    if isinstance(item, dict):
        return str(item.get("content", ""))
    return str(item)


def plain(value: Any) -> str:
    """The field as one text: messages joined by newlines."""
    return "\n".join(parts(value))


def chars(value: Any) -> int:
    """Characters of text in the field, summed over its messages."""
    return sum(len(p) for p in parts(value))


def window(value: Any, offset: int, limit: int) -> tuple[Any, bool]:
    """The field with each message's text cut to [offset, offset + limit), keeping every message
    (roles and other keys as they are); and whether any text goes on past the window."""
    end = offset + limit
    if isinstance(value, str):
        return value[offset:end], len(value) > end
    if not isinstance(value, list):
        return value, False
    out, more = [], False
    for item in value:
        if isinstance(item, dict) and isinstance(item.get("content"), str):
            more = more or len(item["content"]) > end
            out.append({**item, "content": item["content"][offset:end]})
        elif isinstance(item, str):
            more = more or len(item) > end
            out.append(item[offset:end])
        else:
            out.append(item)
    return out, more


def turn_parts(turns: Any) -> list[str]:
    """The texts a list of turns holds (see the module docstring); none for a single turn (None)."""
    out = []
    for turn in turns or []:
        out.append(str(turn.get("text") or ""))
        for call in turn.get("tool_calls") or []:
            out += [str(call.get(key) or "") for key in ("result", "error")]
        out += parts(turn.get("observation") or [])
    return out


def turns_window(turns: Any, offset: int, limit: int) -> tuple[Any, bool]:
    """Each text of each turn cut to [offset, offset + limit), every other key kept; and whether any
    text goes on past the window."""
    if not isinstance(turns, list):
        return turns, False
    end = offset + limit

    def cut(text: Any) -> Any:
        return text[offset:end] if isinstance(text, str) else text

    out = []
    for turn in turns:
        calls = [{**call, "result": cut(call.get("result")), "error": cut(call.get("error"))}
                 for call in turn.get("tool_calls") or []]  # fmt: skip
        observation, _ = window(turn.get("observation") or [], offset, limit)
        out.append({**turn, "text": cut(turn.get("text")), "tool_calls": calls, "observation": observation})
    return out, any(len(text) > end for text in turn_parts(turns))


def field_chars(name: str, value: Any) -> int:
    """Characters of text in field `name` (one of FIELDS)."""
    return sum(len(p) for p in turn_parts(value)) if name == "turns" else chars(value)


def field_window(name: str, value: Any, offset: int, limit: int) -> tuple[Any, bool]:
    """`window` for field `name`: per message, or per text of each turn for "turns"."""
    return turns_window(value, offset, limit) if name == "turns" else window(value, offset, limit)


def capped(fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """Each field cut to TEXT_CAP characters per message, and {field: its full length} for those cut."""
    out, truncated = {}, {}
    for name, value in fields.items():
        out[name], cut = field_window(name, value, 0, TEXT_CAP)
        if cut:
            truncated[name] = field_chars(name, value)
    return out, truncated
