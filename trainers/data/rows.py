"""A dataset record mapped to what a run needs (`map_row`): the prompt (text or chat messages),
the answer and the extra fields, per `DataSpec`'s field names. The studio's dataset check calls the
same function on every row."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainers.data.readers import RowError
from trainers.spec import DataSpec

_ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class FieldMapping:
    """Which fields of a row hold the prompt (text, or chat messages), the answer and the extras."""

    prompt_field: str | None = "prompt"
    messages_field: str | None = None
    answer_field: str | None = None
    extra_fields: tuple[str, ...] = ()

    @classmethod
    def of(cls, spec: DataSpec) -> FieldMapping:
        return cls(spec.prompt_field, spec.messages_field, spec.answer_field, tuple(spec.extra_fields))


@dataclass(frozen=True)
class PromptRow:
    """One dataset row mapped to what a run needs. `row` is 1-based (the line number for JSONL)."""

    id: str
    row: int
    prompt: str | list[dict[str, str]]  # as the user wrote it: text or chat messages
    fields: dict[str, Any]  # answer + extra fields, handed to rubric criteria by name


def map_row(name: str, row: int, rec: dict[str, Any], mapping: FieldMapping) -> PromptRow:
    """A record as the run uses it, or `RowError` naming its first bad field. The one rule for a
    row: the studio's dataset check calls it on every row, so a row it accepts is one a run accepts."""

    def fail(field: str, reason: str, sentence: str) -> RowError:
        return RowError(f"{name} row {row}: {sentence}", field=field, reason=reason)

    def missing(key: str) -> RowError:
        available = ", ".join(map(str, rec)) or "(none)"
        return fail(key, "missing", f"field {key!r} is missing; available fields: {available}")

    def get(key: str) -> Any:
        if rec.get(key) is None:  # a null answer is no answer
            raise missing(key)
        return rec[key]

    if mapping.messages_field:
        prompt: str | list[dict[str, str]] = _messages(get(mapping.messages_field), mapping.messages_field, fail)
    else:
        value = get(mapping.prompt_field)
        if not isinstance(value, str) or not value.strip():
            reason = "must be non-empty text"
            raise fail(mapping.prompt_field, reason, f"field {mapping.prompt_field!r} {reason}, got {value!r:.60}")
        prompt = value
    fields: dict[str, Any] = {}
    if mapping.answer_field:
        fields["answer"] = get(mapping.answer_field)
    for key in mapping.extra_fields:
        if key not in rec:  # an extra field may be null; it must be there
            raise missing(key)
        fields[key] = rec[key]
    return PromptRow(id=str(row), row=row, prompt=prompt, fields=fields)


def _messages(value: Any, key: str, fail) -> list[dict[str, str]]:
    shape = "must be a non-empty list of {role, content} messages"
    if isinstance(value, str):  # CSV cells hold JSON text
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise fail(key, shape, f"field {key!r} must be a list of {{role, content}} messages, got text") from None
    if not isinstance(value, list) or not value:
        raise fail(key, shape, f"field {key!r} {shape}")
    out = []
    for i, msg in enumerate(value):
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
            raise fail(f"{key}[{i}]", "needs a text 'content'", f"field {key!r} message {i}: needs a text 'content'")
        if msg.get("role") not in _ROLES:
            reason = f"role must be one of {', '.join(_ROLES)}, got {msg.get('role')!r}"
            raise fail(f"{key}[{i}]", reason, f"field {key!r} message {i}: {reason}")
        out.append({"role": msg["role"], "content": msg["content"]})
    return out
