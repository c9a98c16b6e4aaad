"""Server-rendered pages: a run's page through a share link (read-only), and compare."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from studio.accounts.permissions import visible
from studio.runs.models import Run
from studio.runs.pages import render_prompts_page, render_run_page
from studio.sharing.models import ShareLink

COMPARE_PICKER_LIMIT = 200


def _live_share(token: str) -> ShareLink:
    share = ShareLink.objects.live().select_related("run", "run__team").filter(token=token).first()
    if share is None:
        raise Http404("this link does not exist or was revoked")
    return share


def shared_run_page(request: HttpRequest, token: str) -> HttpResponse:
    """Read-only run page for whoever holds the link, logged in or not; 404 once revoked."""
    share = _live_share(token)
    return render_run_page(request, share.run, role=None, share=share)


def shared_prompts_page(request: HttpRequest, token: str) -> HttpResponse:
    """The run's prompts view through its share link, read-only; 404 once revoked."""
    share = _live_share(token)
    return render_prompts_page(request, share.run, share=share)


@login_required
def compare_page(request: HttpRequest) -> HttpResponse:
    runs = visible(Run.objects.all(), request.user).select_related("experiment").order_by("-created")
    selected = []  # ?runs=1,2,3, or the runs table's boxes without JavaScript (?run=1&run=2,3: a group's ids)
    for value in [request.GET.get("runs", ""), *request.GET.getlist("run")]:
        for part in value.split(","):
            if part.strip().isdigit() and int(part) not in selected:
                selected.append(int(part))
    context = {
        "runs": runs[:COMPARE_PICKER_LIMIT],
        "selected": selected,
        "config": {"selected": selected},
    }
    return render(request, "compare/page.html", context)
