"""The web process's half of a generation: the model's server made ready (studio.serving.servers),
the checked request sent to it with the process's own key, its answer checked (studio.serving.relay).
Used by /v1/ and by the playground alike, so both talk to the same processes the same way.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings

from studio.serving import relay, servers
from studio.serving.refs import ModelRef

PATHS = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}
KINDS = {"chat": ("chat.completion", "chat.completion.chunk"), "completion": ("text_completion", "text_completion")}
MAX_ERROR_CHARS = 500
TOUCH_EVERY_S = 5.0  # a flowing stream stamps its server's last_used this often, so the idle stop spares it


class ServingError(Exception):
    """A generation that could not be done: the HTTP status and message to answer with."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


def payload(ref: ModelRef, checked: dict[str, Any]) -> dict[str, Any]:
    """What the model process gets: the checked fields, empty optional ones left out."""
    body = {"model": ref.name, **{k: v for k, v in checked.items() if v not in (None, [])}}
    if body.get("stream"):
        body["stream_options"] = {"include_usage": True}
    return body


async def _open(
    ref: ModelRef, kind: str, checked: dict[str, Any], by: str = ""
) -> tuple[httpx.AsyncClient, httpx.Response, int]:
    """The model process's response, its status 200, and its server's id; one new start when a ready
    process is gone. `by`: whose request it is, kept on a server it starts."""
    for attempt in range(2):
        try:
            server = await servers.ready(ref, by=by)
        except servers.NotServing as exc:
            raise ServingError(503, str(exc), "model_not_ready") from None
        client = httpx.AsyncClient(timeout=httpx.Timeout(settings.SERVING_REQUEST_TIMEOUT_S, connect=5.0))
        request = client.build_request("POST", server.address + PATHS[kind], json=payload(ref, checked),
                                       headers={"Authorization": f"Bearer {server.key}"})  # fmt: skip
        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            await client.aclose()
            await sync_to_async(servers.forget)(server.pk, server.address, f"it did not answer ({type(exc).__name__})")
            if attempt:
                raise ServingError(503, f"the model server for {ref.name} does not answer", "model_not_ready") from None
            continue
        if response.status_code == 200:
            return client, response, server.pk
        raw = (await response.aread())[: 64 * 1024]
        await response.aclose()
        await client.aclose()
        raise _engine_error(response.status_code, raw)
    raise AssertionError("unreachable")


def _engine_error(status: int, raw: bytes) -> ServingError:
    """The engine's refusal (a prompt longer than the model's context, say), its message bounded."""
    try:
        error = json.loads(raw).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = None
    text = str(message or raw.decode("utf-8", "replace"))[:MAX_ERROR_CHARS]
    if 400 <= status < 500:
        return ServingError(400, f"the model refused the request: {text}", "invalid_request")
    return ServingError(502, f"the model server failed: {text}", "model_error")


async def complete(ref: ModelRef, kind: str, checked: dict[str, Any], by: str = "") -> dict[str, Any]:
    client, response, _ = await _open(ref, kind, {**checked, "stream": False}, by)
    try:
        return await relay.read_answer(response, ref.name, KINDS[kind][0])
    except relay.BadAnswer as exc:
        raise ServingError(502, f"the model server answered badly: {exc}", "bad_model_answer") from None
    except httpx.TransportError as exc:
        raise ServingError(502, f"the model server broke off ({type(exc).__name__})", "model_error") from None
    finally:
        await response.aclose()
        await client.aclose()
        await sync_to_async(_touch_ref)(ref.name)


async def stream(
    ref: ModelRef, kind: str, checked: dict[str, Any], by: str = ""
) -> AsyncIterator[dict[str, Any] | str]:
    """Open the stream (ServingError now, before any event) and return its checked events."""
    client, response, server_id = await _open(ref, kind, {**checked, "stream": True}, by)

    async def events() -> AsyncIterator[dict[str, Any] | str]:
        try:
            async for event in stamped(relay.relay_events(response, ref.name, KINDS[kind][1]), server_id):
                yield event
        except httpx.TransportError as exc:
            raise relay.BadAnswer(f"the model server broke off ({type(exc).__name__})") from None
        finally:
            with contextlib.suppress(Exception):
                await response.aclose()
                await client.aclose()
            await sync_to_async(_touch_ref)(ref.name)

    return events()


def touch_every_s() -> float:
    """How often a stream stamps its server: well inside the idle time, however short that is set."""
    return min(TOUCH_EVERY_S, settings.SERVING_IDLE_S / 4)


async def stamped(events: AsyncIterator[Any], server_id: int) -> AsyncIterator[Any]:
    """`events` passed through, the server's last_used stamped while they flow (at most every
    touch_every_s()), so a stream longer than SERVING_IDLE_S is not stopped by the idle stop mid-way."""
    every, last = touch_every_s(), time.monotonic()
    async for event in events:
        if time.monotonic() - last >= every:
            last = time.monotonic()
            await sync_to_async(servers.touch)(server_id)
        yield event


def _touch_ref(name: str) -> None:
    from studio.serving.models import ModelServer

    server = ModelServer.objects.filter(ref=name).values_list("pk", flat=True).first()
    if server is not None:
        servers.touch(server)
