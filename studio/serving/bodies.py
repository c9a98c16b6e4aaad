"""The request bodies of /v1/chat/completions and /v1/completions, checked field by field before any
of it reaches a model process: a wrong field is answered 400 naming it (`BadField`), and what is sent
on is rebuilt from the checked fields only.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings

ROLES = ("system", "user", "assistant", "tool")
MAX_MESSAGES = 256
MAX_TEXT_CHARS = 200_000
MAX_STOP = 4
MAX_N = 8
MAX_TOOLS = 64
MAX_SEED = 2**63 - 1
# Fields clients send with their default values (LangChain, the openai client's helpers): accepted when
# they ask for nothing the studio does not do, refused naming the field otherwise.
NEUTRAL = {"user": None, "presence_penalty": 0, "frequency_penalty": 0, "logprobs": False, "stream_options": None,
           "parallel_tool_calls": None}  # fmt: skip


class BadField(ValueError):
    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param
        self.message = f"{param}: {message}"


def _number(body: dict, name: str, low: float, high: float, default: float) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadField(name, "must be a number")
    if not low <= value <= high:
        raise BadField(name, f"must be between {low:g} and {high:g}")
    return float(value)


def _integer(body: dict, name: str, low: int, high: int, default: int | None) -> int | None:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadField(name, "must be an integer")
    if not low <= value <= high:
        raise BadField(name, f"must be between {low} and {high}")
    return value


def _text(value: Any, name: str, limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str):
        raise BadField(name, "must be a string")
    if len(value) > limit:
        raise BadField(name, f"is longer than {limit} characters")
    if "\x00" in value:
        raise BadField(name, "must not contain NUL characters")
    return value


def _stop(body: dict) -> list[str]:
    value = body.get("stop")
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > MAX_STOP:
        raise BadField("stop", f"must be a string or a list of at most {MAX_STOP} strings")
    return [_text(s, f"stop[{i}]", 200) for i, s in enumerate(items) if s != ""]


def _content(value: Any, name: str) -> str:
    """A message's content: a string, or a list of text parts (joined), as the OpenAI API allows."""
    if value is None:
        return ""
    if isinstance(value, list):
        parts = []
        for i, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise BadField(f"{name}[{i}]", "only text parts ({'type': 'text', 'text': ...}) are supported")
            parts.append(_text(part.get("text"), f"{name}[{i}].text"))
        return "".join(parts)
    return _text(value, name)


def _tool_calls(value: Any, name: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        raise BadField(name, f"must be a list of at most {MAX_TOOLS} tool calls")
    calls = []
    for i, call in enumerate(value):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise BadField(f"{name}[{i}].function", "must be an object with name and arguments")
        fname = _text(function.get("name"), f"{name}[{i}].function.name", 200)
        raw = _text(function.get("arguments", "{}"), f"{name}[{i}].function.arguments")
        try:
            json.loads(raw)
        except ValueError:
            raise BadField(f"{name}[{i}].function.arguments", "must be a JSON object in a string") from None
        calls.append({"id": str(call.get("id", ""))[:100], "type": "function",
                      "function": {"name": fname, "arguments": raw}})  # fmt: skip
    return calls


def _messages(body: dict) -> list[dict[str, Any]]:
    value = body.get("messages")
    if not isinstance(value, list) or not value:
        raise BadField("messages", "must be a non-empty list of messages")
    if len(value) > MAX_MESSAGES:
        raise BadField("messages", f"must hold at most {MAX_MESSAGES} messages")
    out = []
    for i, message in enumerate(value):
        name = f"messages[{i}]"
        if not isinstance(message, dict):
            raise BadField(name, "must be an object with role and content")
        role = message.get("role")
        if role not in ROLES:
            raise BadField(f"{name}.role", f"must be one of {', '.join(ROLES)}")
        checked: dict[str, Any] = {"role": role, "content": _content(message.get("content"), f"{name}.content")}
        if role == "assistant" and message.get("tool_calls"):
            checked["tool_calls"] = _tool_calls(message["tool_calls"], f"{name}.tool_calls")
        if role == "tool" and message.get("tool_call_id") is not None:
            checked["tool_call_id"] = _text(message["tool_call_id"], f"{name}.tool_call_id", 100)
        out.append(checked)
    return out


def _tools(body: dict) -> list[dict[str, Any]]:
    value = body.get("tools")
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        raise BadField("tools", f"must be a list of at most {MAX_TOOLS} tools")
    out = []
    for i, tool in enumerate(value):
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise BadField(f"tools[{i}]", "must be {'type': 'function', 'function': {name, description, parameters}}")
        function = tool["function"]
        checked = {"name": _text(function.get("name"), f"tools[{i}].function.name", 200)}
        if function.get("description") is not None:
            checked["description"] = _text(function["description"], f"tools[{i}].function.description", 4000)
        if function.get("parameters") is not None:
            if not isinstance(function["parameters"], dict):
                raise BadField(f"tools[{i}].function.parameters", "must be a JSON schema object")
            checked["parameters"] = function["parameters"]
        out.append({"type": "function", "function": checked})
    if len(json.dumps(out)) > MAX_TEXT_CHARS:
        raise BadField("tools", f"take more than {MAX_TEXT_CHARS} characters as JSON")
    return out


def _neutral(body: dict, known: set[str]) -> None:
    for name, value in body.items():
        if name in known:
            continue
        if name not in NEUTRAL:
            raise BadField(name, "is not a field this endpoint takes")
        if value not in (NEUTRAL[name], None) and not (name == "stream_options" and isinstance(value, dict)):
            raise BadField(name, f"is not supported (only {NEUTRAL[name]!r})")


COMMON = {"model", "stream", "temperature", "top_p", "max_tokens", "seed", "stop", "n"}


def sampling(body: dict) -> dict[str, Any]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadField("stream", "must be true or false")
    return {
        "stream": stream,
        "temperature": _number(body, "temperature", 0.0, 2.0, 1.0),
        "top_p": _number(body, "top_p", 0.0, 1.0, 1.0) or 1.0,
        "max_tokens": _integer(
            body, "max_tokens", 1, settings.SERVING_MAX_TOKENS, min(256, settings.SERVING_MAX_TOKENS)
        ),
        "seed": _integer(body, "seed", 0, MAX_SEED, None),
        "stop": _stop(body),
        "n": _integer(body, "n", 1, MAX_N, 1),
    }


def model_name(body: Any) -> str:
    if not isinstance(body, dict):
        raise BadField("body", "must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadField("model", "is required: the name of a model GET /v1/models lists")
    return model


def chat(body: dict) -> dict[str, Any]:
    """The checked chat request (without `model`, which the caller resolves)."""
    _neutral(body, COMMON | {"messages", "tools", "tool_choice", "max_completion_tokens"})
    if "max_completion_tokens" in body and "max_tokens" not in body:
        body = {**body, "max_tokens": body["max_completion_tokens"]}
    checked = {**sampling(body), "messages": _messages(body), "tools": _tools(body)}
    choice = body.get("tool_choice")
    if choice not in (None, "auto", "none"):
        raise BadField("tool_choice", "only 'auto' and 'none' are supported")
    if choice == "none":
        checked["tools"] = []
    return checked


def completion(body: dict) -> dict[str, Any]:
    _neutral(body, COMMON | {"prompt", "echo"})
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise BadField("prompt", "must be one string (a list of one string is accepted)")
        prompt = prompt[0]
    if body.get("echo") not in (None, False):
        raise BadField("echo", "is not supported")
    return {**sampling(body), "prompt": _text(prompt, "prompt")}
