"""What comes back from a model process, checked before it is relayed: a process is not trusted (a
checkpoint's code, an engine's bug), so its answer is read up to a size, parsed, checked for the
OpenAI shape, and rebuilt with the studio's own model name (an engine reports its folder, a server path).

Streams are relayed event by event as they arrive; each event is checked the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from django.conf import settings

DONE = "[DONE]"
MAX_EVENT_CHARS = 256 * 1024


class BadAnswer(Exception):
    """The model process answered something that is not an OpenAI answer; the message says what."""


def _choice(choice: Any, streamed: bool) -> dict[str, Any]:
    if not isinstance(choice, dict) or not isinstance(choice.get("index"), int) or isinstance(choice["index"], bool):
        raise BadAnswer("a choice without an integer index")
    out: dict[str, Any] = {"index": choice["index"]}
    finish = choice.get("finish_reason")
    if finish is not None and finish not in ("stop", "length", "tool_calls", "content_filter"):
        raise BadAnswer(f"an unknown finish_reason {str(finish)[:40]!r}")
    out["finish_reason"] = finish
    if "text" in choice:
        out["text"] = _string(choice["text"], "text")
        if not streamed:
            out["logprobs"] = None
    key = "delta" if streamed else "message"
    if key in choice:
        out[key] = _message(choice[key])
    if "text" not in out and key not in out:
        raise BadAnswer(f"a choice with neither text nor {key}")
    return out


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise BadAnswer(f"{what} is not a string")
    return value


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise BadAnswer("a message that is not an object")
    out: dict[str, Any] = {}
    if message.get("role") is not None:
        out["role"] = "assistant"
    content = message.get("content")
    out["content"] = None if content is None else _string(content, "content")
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise BadAnswer("tool_calls is not a list")
        out["tool_calls"] = [_call(c) for c in calls]
    return out


def _call(call: Any) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise BadAnswer("a tool call without a function")
    out: dict[str, Any] = {"type": "function", "function": {}}
    if isinstance(call.get("index"), int):
        out["index"] = call["index"]
    if call.get("id") is not None:
        out["id"] = _string(call["id"], "tool call id")[:100]
    for field in ("name", "arguments"):
        if function.get(field) is not None:
            out["function"][field] = _string(function[field], f"tool call {field}")
    return out


def _usage(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    fields = ("prompt_tokens", "completion_tokens", "total_tokens")
    if not all(isinstance(usage.get(f), int) and not isinstance(usage.get(f), bool) for f in fields):
        return None
    return {f: usage[f] for f in fields}


def checked(answer: Any, name: str, kind: str, streamed: bool = False) -> dict[str, Any]:
    """The answer rebuilt from its checked fields, `model` set to the studio's name for it."""
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
        raise BadAnswer("not an object with a list of choices")
    out = {
        "id": str(answer.get("id", ""))[:100],
        "object": kind,
        "created": answer["created"] if isinstance(answer.get("created"), int) else 0,
        "model": name,
        "choices": [_choice(c, streamed) for c in answer["choices"]],
    }
    usage = _usage(answer.get("usage"))
    if usage is not None or not streamed:
        out["usage"] = usage
    return out


async def read_answer(response: httpx.Response, name: str, kind: str) -> dict[str, Any]:
    """A whole (not streamed) answer, at most SERVING_MAX_RESPONSE_BYTES."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > settings.SERVING_MAX_RESPONSE_BYTES:
            raise BadAnswer(f"an answer longer than {settings.SERVING_MAX_RESPONSE_BYTES} bytes")
    try:
        answer = json.loads(body)
    except ValueError:
        raise BadAnswer("an answer that is not JSON") from None
    return checked(answer, name, kind)


async def relay_events(response: httpx.Response, name: str, kind: str) -> AsyncIterator[dict[str, Any] | str]:
    """The checked events of a stream as they arrive (dicts), then DONE; BadAnswer on the first bad one."""
    total = 0
    async for line in response.aiter_lines():
        total += len(line)
        if len(line) > MAX_EVENT_CHARS or total > settings.SERVING_MAX_RESPONSE_BYTES:
            raise BadAnswer("a stream longer than the studio relays")
        if not line.strip() or line.startswith(":"):
            continue
        if not line.startswith("data:"):
            raise BadAnswer("a stream line that is not a data event")
        data = line[5:].strip()
        if data == DONE:
            yield DONE
            return
        try:
            event = json.loads(data)
        except ValueError:
            raise BadAnswer("a stream event that is not JSON") from None
        if isinstance(event, dict) and "error" in event:  # the engine's own error mid-stream (vLLM)
            error = event["error"] if isinstance(event["error"], dict) else {}
            raise BadAnswer(f"the engine stopped: {str(error.get('message', ''))[:300]}")
        yield checked(event, name, kind, streamed=True)
    raise BadAnswer("a stream that ended without [DONE]")
