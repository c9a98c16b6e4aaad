"""The team's API tokens page, and a run's playground: a chat with its checkpoints (or its base model)
streamed through the studio, two models side by side, the conversation saved as a note on the run or
as a row of one of the team's uploaded datasets (studio.datasets.rows).

The playground is opened by members of the run's team (any role: it changes nothing), as the run's
page is; share links do not open it. Generations go through the same model processes as /v1/
(studio.serving.proxy); saving a note or a row needs an owner's or editor's role, as notes and
datasets do elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render

from studio.accounts import permissions as perms
from studio.accounts.models import Team
from studio.datasets import rows
from studio.datasets.models import Dataset
from studio.experiments import paths
from studio.lib.params import as_id
from studio.runs.models import Run
from studio.serving import agent, bodies, proxy, refs, relay, tokens
from studio.serving.api import sse
from studio.serving.models import SCOPES, ApiToken
from studio.sharing.models import TEXT_MAX, Note, notes_changed

PLAYGROUND_TAG = "playground"


@login_required
def api_tokens(request: HttpRequest, team_id: int) -> HttpResponse:
    team = perms.get_for(request.user, Team.objects.all(), team_id)
    role = perms.check(request.user, team)
    new_key, error = "", ""
    if request.method == "POST":
        perms.check(request.user, team, perms.EDIT)
        if "revoke" in request.POST:
            token = ApiToken.objects.filter(team=team, pk=as_id(request.POST.get("revoke"))).first()
            if token is None:
                raise Http404("not found")
            tokens.revoke(token)
            return redirect("team-api-tokens", team_id=team.pk)
        name = request.POST.get("name", "").strip()[:100]
        scopes = request.POST.getlist("scopes")
        error = "name: give the token a name" if not name else ""
        if not error and (problem := tokens.scope_errors(scopes)):
            error = f"scopes: {problem}"
        if not error:
            _, new_key = tokens.create(team, name, scopes, request.user)
    context = {"team": team, "role": role, "can_edit": perms.role_allows(role, perms.EDIT), "scopes": SCOPES,
               "tokens": ApiToken.objects.filter(team=team), "new_key": new_key, "error": error}  # fmt: skip
    return render(request, "serving/api_tokens.html", context, status=400 if error else 200)


@login_required
def playground(request: HttpRequest, run_id: int) -> HttpResponse:
    run = perms.get_for(request.user, Run.objects, run_id)
    team_ids = set(perms.visible_teams(request.user).values_list("pk", flat=True))
    own = [r for r in refs.listed({run.team_id}) if r.run_id == run.pk]
    others = [r for r in refs.listed(team_ids) if r.run_id != run.pk][:100]
    context = {"run": run, "own": own, "others": others, "max_tokens": settings.SERVING_MAX_TOKENS,
               "can_note": perms.has_role(request.user, run.team_id, perms.EDIT),
               "row_datasets": [d for d in Dataset.objects.filter(team_id=run.team_id, source="upload", format="jsonl")
                                if rows.takes_rows(d)],
               "run_tools": agent.tool_names(agent.run_environment(run.spec)),
               "has_tools": agent.run_environment(run.spec) is not None}  # fmt: skip
    return render(request, "serving/playground.html", context)


def _prepare(request: HttpRequest, run_id: int) -> tuple[refs.ModelRef, dict[str, Any], dict | None] | JsonResponse:
    """(the model, the checked request, the run's tools environment when the page asks to use it)."""
    if not request.user.is_authenticated:
        return JsonResponse({"error": {"message": "sign in first", "param": None}}, status=403)
    run = perms.get_for(request.user, Run.objects, run_id)
    try:
        body = json.loads(request.body or b"null")
        section = _run_tools(body, run)
        name = bodies.model_name(body)
        checked = bodies.chat({**body, "stream": True})
    except ValueError as exc:  # BadField is one
        param = getattr(exc, "param", "body")
        return JsonResponse({"error": {"message": getattr(exc, "message", str(exc)), "param": param}}, status=400)
    team_ids = set(perms.visible_teams(request.user).values_list("pk", flat=True))
    ref = refs.resolve(name, team_ids)
    if ref is None:
        return JsonResponse({"error": {"message": f"model: no model {name[:200]!r} of your teams", "param": "model"}},
                            status=404)  # fmt: skip
    return ref, checked, section


def _run_tools(body: Any, run: Run) -> dict[str, Any] | None:
    """The run's tools environment when `use_run_tools` is true (taken out of the body), else None."""
    use = body.pop("use_run_tools", False) if isinstance(body, dict) else False
    if not isinstance(use, bool):
        raise bodies.BadField("use_run_tools", "must be true or false")
    section = agent.run_environment(run.spec)
    if use and section is None:
        raise bodies.BadField("use_run_tools", "this run's spec has no tools environment")
    # The path policy again at each use, as a run's worker checks before it reads: a tool's corpus or
    # function file accepted at launch may have become a link into the data folder since.
    if use and (refused := paths.environment_errors(section, run.team)):
        field, why = next(iter(refused.items()))
        raise bodies.BadField("use_run_tools", f"the run's environment {field}: {why}")
    return section if use else None


async def _events(events: AsyncIterator[dict[str, Any] | str]) -> AsyncIterator[bytes]:
    try:
        async for event in events:
            yield sse(event)
    except relay.BadAnswer as exc:
        yield sse({"error": {"message": f"the model server answered badly: {exc}"}})


async def playground_generate(request: HttpRequest, run_id: int) -> HttpResponse:
    """POST {model, messages, sampling...}: the reply's chunks as server-sent events, as they come."""
    if request.method != "POST":
        return JsonResponse({"error": {"message": "use POST", "param": None}}, status=405)
    user = await request.auser()  # the session's user, read here, not in the sync part
    prepared = await sync_to_async(_prepare)(request, run_id)
    if isinstance(prepared, JsonResponse):
        return prepared
    ref, checked, section = prepared
    try:
        if section is not None:  # the run's tools, run on the worker between the model's turns
            start = await agent.begin(ref, checked, section, user.get_username())
            events = agent.events(ref, checked, section, start, user.get_username())
        else:
            events = await proxy.stream(ref, "chat", checked, by=user.get_username())
    except proxy.ServingError as exc:
        return JsonResponse({"error": {"message": exc.message, "param": exc.param}}, status=exc.status)
    response = StreamingHttpResponse(_events(events), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    return response


def conversation_text(model: str, messages: list[dict[str, Any]]) -> str:
    """The note's text: the model, then each message as "role: content", cut to a note's length."""
    lines = [f"Playground conversation with {model}:"]
    lines += [f"{m['role']}: {m['content']}" for m in messages]
    text = "\n\n".join(lines)
    return text if len(text) <= TEXT_MAX else text[: TEXT_MAX - 1] + "…"


def _saved_conversation(request: HttpRequest) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    """The body of a save: (body, model name, checked messages); ValueError naming the field."""
    body = json.loads(request.body or b"null")
    name = bodies.model_name(body)
    return body, name, bodies.chat({"messages": body.get("messages")})["messages"]


def _bad(exc: ValueError) -> JsonResponse:
    param = getattr(exc, "param", "body")
    return JsonResponse({"error": {"message": getattr(exc, "message", str(exc)), "param": param}}, status=400)


def _save_request(request: HttpRequest, run_id: int) -> tuple[Run, dict[str, Any], str, list[dict[str, Any]]] | JsonResponse:
    """A save's (run, body, model name, checked messages): a POST by an owner or editor of the run's team
    (403/404 otherwise); the JSON error to answer instead when the body is refused."""
    if request.method != "POST":
        return JsonResponse({"error": {"message": "use POST", "param": None}}, status=405)
    run = perms.get_for(request.user, Run.objects, run_id, perms.EDIT)
    try:
        return (run, *_saved_conversation(request))
    except ValueError as exc:
        return _bad(exc)


@login_required
def playground_save(request: HttpRequest, run_id: int) -> HttpResponse:
    asked = _save_request(request, run_id)
    if isinstance(asked, JsonResponse):
        return asked
    run, _, name, messages = asked
    note = Note.objects.create(run=run, author=request.user, tag=PLAYGROUND_TAG,
                               text=conversation_text(name[:200], messages))  # fmt: skip
    notes_changed(run.pk, note.pk)
    return JsonResponse({"note": note.pk}, status=201)


@login_required
def playground_save_row(request: HttpRequest, run_id: int) -> HttpResponse:
    """The conversation as the last row of a dataset of the run's team (`dataset`: its id, or "new" for a
    new "Playground conversations" dataset), to train or evaluate on later."""
    asked = _save_request(request, run_id)
    if isinstance(asked, JsonResponse):
        return asked
    run, body, _, messages = asked
    target = body.get("dataset")
    pk = None if target == "new" else as_id(target)
    if target != "new" and pk is None:
        return JsonResponse({"error": {"message": 'a dataset id, or "new"', "param": "dataset"}}, status=400)
    try:
        dataset = rows.save_conversation(run.team, request.user, pk, messages)
    except rows.RowRefused as exc:
        return JsonResponse({"error": {"message": str(exc), "param": "dataset"}}, status=400)
    return JsonResponse({"dataset": dataset.pk, "name": dataset.name, "rows": dataset.row_count}, status=201)
