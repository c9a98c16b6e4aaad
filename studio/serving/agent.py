"""The playground's "use the run's tools": an agent checkpoint talking with its run's `tools` environment.

Each model turn streams to the page as any reply does; a turn that ends in tool calls has them run by
the trainer's ToolsEnvironment (its parser, tools, sandbox and bounds on each result) in the model
server's process on the worker (workers.serving.agent_tools, behind POST /studio/tools/...), never
here; each call is sent to the page as soon as the turn is read, its result once the worker ran it;
the results go back as the `tool` messages and the model is asked again, up to the environment's
max_turns, each turn's tokens capped by its max_turn_tokens. Events besides the relayed chunks:
{"tool_call": {name, arguments}}, {"tool_result": {name, content, error, truncated}},
{"tool_notice": text}.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from django.conf import settings

from studio.serving import proxy, servers
from studio.serving.refs import ModelRef
from trainers.rollout.environments.tool_calls import parse_tool_calls

TOOLS_KIND = "tools"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
DONE = "[DONE]"


def run_environment(spec: Any) -> dict[str, Any] | None:
    """The run's `tools` environment section (spec["environment"]), or None when it has none."""
    section = spec.get("environment") if isinstance(spec, dict) else None
    return section if isinstance(section, dict) and section.get("kind") == TOOLS_KIND else None


def tool_names(section: dict[str, Any] | None) -> list[str]:
    """The kinds of the section's tools, for the page's label."""
    params = (section or {}).get("params") or {}
    tools = params.get("tools") if isinstance(params, dict) else None
    return [str(t.get("kind", "?"))[:50] for t in tools if isinstance(t, dict)][:20] if isinstance(tools, list) else []


async def _post(ref: ModelRef, what: str, body: dict[str, Any], by: str) -> dict[str, Any]:
    """The model server's answer to /studio/tools/<what>; ServingError when it cannot give one."""
    try:
        server = await servers.ready(ref, by=by)
    except servers.NotServing as exc:
        raise proxy.ServingError(503, str(exc), "model_not_ready") from None
    if server.engine != "transformers":
        raise proxy.ServingError(400, f"use_run_tools: the run's tools run in the studio's transformers model "
                                      f"server, and {ref.name} is served by {server.engine}", "unsupported",
                                 "use_run_tools")  # fmt: skip
    async with httpx.AsyncClient(timeout=httpx.Timeout(settings.SERVING_REQUEST_TIMEOUT_S, connect=5.0)) as client:
        try:
            response = await client.post(f"{server.address}/studio/tools/{what}", json=body,
                                         headers={"Authorization": f"Bearer {server.key}"})  # fmt: skip
        except httpx.TransportError as exc:
            raise proxy.ServingError(502, f"the model server broke off ({type(exc).__name__})", "model_error") from None
    raw = response.content[: settings.SERVING_MAX_RESPONSE_BYTES + 1]
    if response.status_code != 200:
        error = proxy._engine_error(response.status_code, raw[: 64 * 1024])
        raise proxy.ServingError(error.status, error.message.replace("the model refused", "the tools refused"),
                                 error.code, "use_run_tools")  # fmt: skip
    try:
        answer = json.loads(raw) if len(raw) <= settings.SERVING_MAX_RESPONSE_BYTES else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise proxy.ServingError(502, "the model server answered the tools badly", "bad_model_answer")
    return answer


def _messages(value: Any, what: str) -> list[dict[str, str]]:
    """Messages from the worker, checked: each a role and text content, nothing else relayed."""
    if not isinstance(value, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value
    ):
        raise proxy.ServingError(502, f"the model server answered the tools badly ({what})", "bad_model_answer")
    return [{"role": m["role"], "content": m["content"]} for m in value]


async def begin(ref: ModelRef, checked: dict[str, Any], section: dict[str, Any], by: str) -> dict[str, Any]:
    """The episode's start (its first messages, stop strings, turn limits): ServingError now, before any event."""
    # Earlier turns come back from the page as the engine gave them: their calls closed again, as trained on.
    earlier = [{**m, "content": closed(m["content"])} if m["role"] == "assistant" else m for m in checked["messages"]]
    start = await _post(ref, "start", {"environment": section, "messages": earlier}, by)
    limits = [start.get(k) for k in ("max_turns", "max_turn_tokens")]
    if not all(isinstance(v, int) and v > 0 for v in limits) or not isinstance(start.get("stop"), list):
        raise proxy.ServingError(502, "the model server answered the tools badly (start)", "bad_model_answer")
    start["messages"] = _messages(start.get("messages"), "start")
    start["stop"] = [str(s) for s in start["stop"]][:4]  # the studio's request takes up to 4 stop strings
    return start


def closed(text: str) -> str:
    """The turn as the model wrote it: the engine drops the stop string a Hermes call ends with
    (OpenAI's rule); training keeps it in the turn's text, so it is put back."""
    return text + CALL_CLOSE if text.rfind(CALL_OPEN) > text.rfind(CALL_CLOSE) else text


async def events(ref: ModelRef, checked: dict[str, Any], section: dict[str, Any], start: dict[str, Any],
                 by: str) -> AsyncIterator[dict[str, Any] | str]:  # fmt: skip
    """Every turn's relayed chunks, each call and its result between turns, then one DONE."""
    messages = list(start["messages"])
    turn_tokens = min(int(checked.get("max_tokens") or settings.SERVING_MAX_TOKENS), start["max_turn_tokens"])
    body = {**checked, "tools": [], "n": 1, "max_tokens": turn_tokens, "stop": start["stop"] or None}
    try:
        for turn in range(start["max_turns"]):
            text = ""
            async for event in await proxy.stream(ref, "chat", {**body, "messages": messages}, by=by):
                if event == DONE:
                    continue
                for choice in event.get("choices") or []:
                    text += (choice.get("delta") or {}).get("content") or ""
                yield event
            text = closed(text)
            formats = (section.get("params") or {}).get("formats") or ("hermes",)
            calls = parse_tool_calls(text, tuple(formats))  # what the page shows at once; the worker parses again
            for call in calls:
                yield {"tool_call": {"name": call.name, "arguments": call.arguments}}
            if not calls:
                break
            stepped = await _post(ref, "step", {"environment": section, "text": text}, by)
            if not isinstance(stepped.get("calls"), list):
                raise proxy.ServingError(502, "the model server answered the tools badly (step)", "bad_model_answer")
            for call in stepped["calls"]:
                call = call if isinstance(call, dict) else {}
                yield {"tool_result": {"name": str(call.get("name", ""))[:200], "content": str(call.get("result", "")),
                                       "error": call.get("error") if isinstance(call.get("error"), str) else None,
                                       "truncated": bool(call.get("truncated"))}}  # fmt: skip
            if stepped.get("done"):
                break
            messages += [{"role": "assistant", "content": text}, *_messages(stepped.get("observation"), "step")]
            if turn == start["max_turns"] - 1:
                yield {"tool_notice": f"the environment's {start['max_turns']} turns are used up"}
    except proxy.ServingError as exc:
        yield {"error": {"message": exc.message}}
    yield DONE
