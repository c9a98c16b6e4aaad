"""OpenAI chat requests as token ids for a transformers model, and tool calls back in the OpenAI shape.

Tools: a chat template that takes `tools` gets them; one that does not (the tiny models) gets them as
the trainer's tools environment writes them, a system message listing their schemas (Qwen's text),
so a checkpoint trained with the `tools` environment sees in the playground what it saw in training.
Message contents are tokenised as text (`trainers.data.prompts`): they never become special tokens.
The model's calls are read by the trainer's parser (`hermes` format), which bounds what it reads.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from trainers.data.prompts import encode_chat, spans_ids, template_spans
from trainers.rollout.environments.catalog import QWEN_TOOLS_PROMPT, TOOLS_PLACEHOLDER, ToolsParams
from trainers.rollout.environments.tool_calls import parse_tool_calls

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
# The intro of a tools episode whose row has no system message, as the environment's default.
DEFAULT_INTRO = ToolsParams.model_fields["system_prompt"].default


def template_takes_tools(tokenizer) -> bool:
    return "tools" in (getattr(tokenizer, "chat_template", None) or "")


def tools_system_text(tools: list[dict[str, Any]], intro: str = DEFAULT_INTRO) -> str:
    """The system message the `tools` environment opens an episode with (ToolsEnvironment.reset):
    `tools` in the OpenAI shape ({"type": "function", "function": {...}}), one a line."""
    schemas = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return f"{intro}\n\n{QWEN_TOOLS_PROMPT.replace(TOOLS_PLACEHOLDER, schemas)}".strip()


def _call_text(call: dict[str, Any]) -> str:
    function = call["function"]
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    return CALL_OPEN + json.dumps({"name": function["name"], "arguments": arguments}, ensure_ascii=False) + CALL_CLOSE


def plain_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages as a template without tool support reads them: calls written into the assistant's
    text as the model wrote them, the tools' schemas in the system message."""
    out = []
    for message in messages:
        content = message.get("content") or ""
        if message.get("tool_calls"):
            content = content + "".join(_call_text(c) for c in message["tool_calls"])
        out.append({"role": message["role"], "content": content})
    if tools:
        opened = bool(out) and out[0]["role"] == "system"
        intro = out[0]["content"] if opened else DEFAULT_INTRO
        out = [{"role": "system", "content": tools_system_text(tools, intro)}, *(out[1:] if opened else out)]
    return out


def prompt_ids(tokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
    if tools and template_takes_tools(tokenizer):
        spans = template_spans(tokenizer, messages, add_generation_prompt=True, tools=tools)
        return spans_ids(tokenizer, spans)
    _, ids = encode_chat(tokenizer, plain_messages(messages, tools))
    return ids


def split_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(the text before the first call or None, the turn's well-formed calls in the OpenAI shape)."""
    if CALL_OPEN not in text:
        return text, []
    calls = [c for c in parse_tool_calls(text, ("hermes",)) if not c.error and c.name]
    if not calls:
        return text, []
    before = text.split(CALL_OPEN, 1)[0].strip()
    return before or None, [
        {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
         "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
        for c in calls
    ]  # fmt: skip
