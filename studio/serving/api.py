"""The OpenAI-compatible endpoint: GET /v1/models, POST /v1/chat/completions, POST /v1/completions.

Authorised by a team API token (studio.serving.tokens) with a scope: `models:read` to list,
`inference` to generate; `model` must name a model of the token's team (studio.serving.refs).
Errors come in the OpenAI shape ({"error": {message, type, param, code}}) so the official client
raises its usual exceptions; a wrong field is answered 400 naming it in `param` and the message.
The web process authorises and proxies (studio.serving.proxy); streams pass through as they arrive.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from studio.serving import bodies, proxy, refs, relay, tokens
from studio.serving.models import INFERENCE, MODELS_READ, ApiToken

TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
         404: "invalid_request_error", 405: "invalid_request_error", 413: "invalid_request_error"}  # fmt: skip


def error(status: int, message: str, code: str, param: str | None = None) -> JsonResponse:
    kind = TYPES.get(status, "server_error")
    return JsonResponse({"error": {"message": message, "type": kind, "param": param, "code": code}}, status=status)


def _authorised(request: HttpRequest, scope: str) -> ApiToken | JsonResponse:
    token = tokens.authenticate(request.headers.get("Authorization"))
    if token is None:
        return error(401, "a valid team API token is required (Authorization: Bearer rs-...); "
                          "an owner or editor makes one on the team's page", "invalid_api_key")  # fmt: skip
    if scope not in token.scopes:
        return error(403, f"this token lacks the {scope!r} scope (it has: {', '.join(token.scopes)})",
                     "insufficient_scope")  # fmt: skip
    return token


def _models(request: HttpRequest) -> JsonResponse:
    token = _authorised(request, MODELS_READ)
    if isinstance(token, JsonResponse):
        return token
    data = [{"id": r.name, "object": "model", "created": r.created, "owned_by": token.team.name}
            for r in refs.listed({token.team_id})]  # fmt: skip
    return JsonResponse({"object": "list", "data": data})


async def models(request: HttpRequest) -> HttpResponse:
    if request.method != "GET":
        return error(405, "use GET", "method_not_allowed")
    return await sync_to_async(_models)(request)


def _prepare(request: HttpRequest, kind: str) -> tuple[refs.ModelRef, dict[str, Any], str] | JsonResponse:
    """The model, the checked body of a generation request and who asks (the token), or the error to answer."""
    token = _authorised(request, INFERENCE)
    if isinstance(token, JsonResponse):
        return token
    try:
        body = json.loads(request.body or b"null")
    except ValueError as exc:
        return error(400, f"body: not JSON ({exc})", "invalid_json", "body")
    try:
        name = bodies.model_name(body)
        checked = bodies.chat(body) if kind == "chat" else bodies.completion(body)
    except bodies.BadField as exc:
        return error(400, exc.message, "invalid_value", exc.param)
    ref = refs.resolve(name, {token.team_id})
    if ref is None:
        return error(404, f"model: no model {name[:200]!r} this token's team may use (GET /v1/models lists them)",
                     "model_not_found", "model")  # fmt: skip
    return ref, checked, f"API token {token.name!r}"


def sse(event: dict[str, Any] | str) -> bytes:
    return f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode()


async def _sse_stream(events: AsyncIterator[dict[str, Any] | str]) -> AsyncIterator[bytes]:
    try:
        async for event in events:
            yield sse(event)
    except relay.BadAnswer as exc:  # after the 200 went out: the error is the stream's last event
        yield sse({"error": {"message": f"the model server answered badly: {exc}", "type": "server_error",
                             "param": None, "code": "bad_model_answer"}})  # fmt: skip


async def _generate(request: HttpRequest, kind: str) -> HttpResponse:
    if request.method != "POST":
        return error(405, "use POST", "method_not_allowed")
    prepared = await sync_to_async(_prepare)(request, kind)
    if isinstance(prepared, JsonResponse):
        return prepared
    ref, checked, by = prepared
    try:
        if not checked["stream"]:
            return JsonResponse(await proxy.complete(ref, kind, checked, by))
        events = await proxy.stream(ref, kind, checked, by)
    except proxy.ServingError as exc:
        return error(exc.status, exc.message, exc.code, exc.param)
    response = StreamingHttpResponse(_sse_stream(events), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a reverse proxy in front passes events on as they come
    return response


@csrf_exempt  # bearer tokens, not cookies: no cross-site request can carry one
async def chat_completions(request: HttpRequest) -> HttpResponse:
    return await _generate(request, "chat")


@csrf_exempt
async def completions(request: HttpRequest) -> HttpResponse:
    return await _generate(request, "completion")


models = csrf_exempt(models)
