"""Server-rendered pages: the run page, the same page through a share link, and compare.

The pages render a frame and a JSON config; the JS modules in frontend/static/js fetch the
data (curves, rollouts, notes) and follow the websocket.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from studio.accounts.permissions import EDIT, role_allows, role_in, visible
from studio.runs.models import Run, RunEvent
from studio.sharing.models import ShareLink

LOG_TAIL = 200
COMPARE_PICKER_LIMIT = 200


def _criteria(run: Run) -> list[str]:
    rubric = (run.spec or {}).get("rubric") or {}
    return [c.get("name") for c in rubric.get("criteria", []) if isinstance(c, dict) and c.get("name")]


def _log_tail(run: Run) -> list[str]:
    """The last log lines, oldest first; the websocket appends the rest."""
    events = RunEvent.objects.filter(run=run, kind__in=("log", "status")).order_by("-seq")[:LOG_TAIL]
    lines = []
    for event in reversed(events):
        data = event.payload or {}
        lines.append(
            data.get("line") if event.kind == "log" else f"[{data.get('state')}] {data.get('detail', '')}".strip()
        )
    return [line for line in lines if line]


def _run_page(request: HttpRequest, run: Run, *, role: str | None, share: ShareLink | None) -> HttpResponse:
    can_edit = role_allows(role, EDIT)
    config: dict[str, Any] = {
        "run": run.summary(),
        "share_token": share.token if share else None,
        "can_note": can_edit,
        "can_share": can_edit,
        "can_cancel": can_edit,
        "criteria": _criteria(run),
        "log_lines": _log_tail(run),
    }
    context = {"run": run, "config": config, "share": share, "can_edit": can_edit}
    template = "share/run.html" if share else "runs/detail.html"
    return render(request, template, context)


@login_required
@ensure_csrf_cookie  # the page's JS posts notes and share links with the cookie's token
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = Run.objects.filter(pk=run_id).select_related("team", "experiment").first()
    role = role_in(request.user, run.team_id) if run else None
    if run is None or role is None:
        raise Http404("not found")
    return _run_page(request, run, role=role, share=None)


def shared_run_page(request: HttpRequest, token: str) -> HttpResponse:
    """Read-only run page for whoever holds the link, logged in or not; 404 once revoked."""
    share = ShareLink.objects.live().select_related("run", "run__team").filter(token=token).first()
    if share is None:
        raise Http404("this link does not exist or was revoked")
    return _run_page(request, share.run, role=None, share=share)


@login_required
def compare_page(request: HttpRequest) -> HttpResponse:
    runs = visible(Run.objects.all(), request.user).select_related("experiment").order_by("-created")
    selected = []
    for part in request.GET.get("runs", "").split(","):
        if part.strip().isdigit():
            selected.append(int(part))
    context = {
        "runs": runs[:COMPARE_PICKER_LIMIT],
        "selected": selected,
        "config": {"selected": selected},
    }
    return render(request, "compare/page.html", context)
