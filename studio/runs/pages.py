"""The runs list (resume, evaluate, clone, stop) and the run page: curves, rollouts, log and notes.

The run page renders a frame and a JSON config; the JS modules in frontend/static/js fetch the
data (curves, rollouts, notes) and follow the websocket. A share link shows the same page
read-only (studio.sharing.pages).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import ensure_csrf_cookie

from studio.accounts import permissions as perms
from studio.experiments.models import Experiment
from studio.experiments.specs import asynchrony_note
from studio.lib.errors import FieldErrors, Refused
from studio.runs import (
    exports,
    lifecycle,
    panels,
    prompt_stat_query,
    provenance,
    queueing,
    rollout_query,
    table_page,
    tags,
)
from studio.runs.models import PROMPT_STATUSES, Run, RunEvent
from studio.sharing.models import ShareLink
from studio.sharing.share_view import share_view

LOG_TAIL = 200
LISTED_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")
# The runs tables' buttons (runs/table.html) without JavaScript; with it, run_actions.js calls the API.
# Each is the service the API calls, refused by the same rule (Run.action_refusals).
RUN_ACTIONS = {
    "resume": lifecycle.resume,
    "evaluate": lifecycle.evaluate_checkpoint,
    "clone": lifecycle.clone,
    "rerun": lambda run, user: lifecycle.rerun_exactly(run, user)[0],
}


@login_required
def runs(request: HttpRequest) -> HttpResponse:
    answers: dict[int, str] = {}  # a refused action's reason, shown in its run's row
    if request.method == "POST":
        run = perms.get_for(request.user, Run.objects.all(), request.POST.get("run"), perms.EDIT)
        try:
            action = request.POST.get("action")
            if action in RUN_ACTIONS:
                new = RUN_ACTIONS[action](run, request.user)
                return redirect("run-detail", new.pk)
            if action != "cancel":
                raise lifecycle.RunActionError(f"unknown action {action!r}")
            lifecycle.request_cancel(run)
            return redirect(f"{request.path}#run-{run.pk}")
        except Refused as exc:  # RunActionError, or a clone's settings refused (SpecError naming each field)
            answers[run.pk] = str(exc)
    again = table_page.added_filter_link(request)
    if again is not None:  # the form's "add a filter": the same view as a link of ?set.<path>= parameters
        return redirect(f"{request.path}{again}")
    rows = perms.visible(Run.objects.all(), request.user).select_related("experiment", "team")
    state = request.GET.get("state")
    if state:
        rows = rows.filter(state=state)
    experiments = perms.visible(Experiment.objects.all(), request.user).order_by("-created")
    context = {**table_page.context(request, rows, experiments), "state": state, "answers": answers}
    query = context["table_query"]  # the state links keep the table's columns, sort and filters
    context["state_links"] = [(name, query.link(state=name)) for name in LISTED_STATES]
    context["all_states_link"] = query.link()
    return render(request, "runs/list.html", context, status=409 if answers else 400 if context["table_error"] else 200)


@login_required
def run_tags(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run page's tags form (POST, editors and owners): the run's tags become the field's words."""
    if request.method != "POST":
        return redirect("run-detail", run_id)
    run = perms.get_for(request.user, Run.objects.all(), run_id, perms.EDIT)  # 404 outsiders, 403 viewers
    try:
        tags.set_tags(run, tags.from_text(request.POST.get("tags", "")))
    except FieldErrors as exc:
        return HttpResponse(f"tags: {exc.errors['tags']}", status=400, content_type="text/plain; charset=utf-8")
    return redirect(f"/runs/{run.pk}/#tags")


def _export_losses(run: Run) -> dict:
    """exports.losses, or {"error": why} for the page to say in place of the export links."""
    try:
        return exports.losses(run)
    except exports.ExportError as exc:
        return {"error": str(exc)}


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


def render_run_page(request: HttpRequest, run: Run, *, role: str | None, share: ShareLink | None) -> HttpResponse:
    """The run page for a member (`role`) or, read-only, for whoever holds the share link `share`."""
    can_edit = perms.role_allows(role, perms.EDIT)
    # The runs it continues, drawn before its own curves; a share link shows this run's alone (it opens no other).
    lineage = [] if share else lifecycle.lineage(run)
    queue = queueing.waits_behind(run, name_runs=share is None)  # a share link's reader sees no other run's name
    config: dict[str, Any] = {
        "run": {**run.summary(), "queue": queue},
        "share_token": share.token if share else None,
        "can_note": can_edit,
        "can_share": can_edit,
        "can_cancel": can_edit,
        "can_act": can_edit,  # resume, evaluate, clone, stop: those run.actions names
        "criteria": _criteria(run),
        "log_lines": _log_tail(run),
        "lineage": lineage,
        "reserved_panels": panels.reserved(run.spec),
    }
    tag_names = [] if share else tags.names(run)
    opening = rollout_query.opening_split(run.pk, run.kind)
    restarts = list(run.restart_log.all())
    # Provenance and exports: members only (a share link shows curves and rollouts, not the machine or code).
    facts = {} if share else {"provenance": provenance.summary(run), "repeats": provenance.repeat_differences(run),
                              "exports": _export_losses(run)}  # fmt: skip
    # An asynchronous run says that it is not bit-reproducible (its settings, not its metrics, decide).
    context = {"run": run, "config": config, "share": share, "can_edit": can_edit, "restarts": restarts, "queue": queue,
               "resumed": lineage[-1] if lineage else None, "asynchrony": asynchrony_note(run.spec),
               "opening_split": opening, "tags": tag_names, **facts}  # fmt: skip
    if share:  # a share link's reader: the same page, without host names or server paths
        return render(request, "share/run.html", share_view(context, run))
    return render(request, "runs/detail.html", context)


def render_prompts_page(request: HttpRequest, run: Run, *, share: ShareLink | None) -> HttpResponse:
    """The run's prompts view for a member or, read-only, whoever holds the share link `share`.
    Its JS lists the statistics from the API (studio.runs.prompt_stat_query) and reads them again
    on its Reload button and, throttled, on the websocket's `prompt_stats` events after `cursor`:
    read before the page's first list, so no step written after that list is missed."""
    run_url = f"/share/{share.token}/" if share else f"/runs/{run.pk}/"
    config = {
        "run": run.summary(),
        "share_token": share.token if share else None,
        "cursor": run.last_seq,
        "run_url": run_url,
        "orders": prompt_stat_query.ORDER_TITLES,
        "default_order": prompt_stat_query.DEFAULT_ORDER,
        "statuses": dict(PROMPT_STATUSES),
        "prompt_param": rollout_query.PROMPT,
    }
    context = {"run": run, "config": config, "share": share, "run_url": run_url}
    return render(request, "runs/prompts.html", share_view(context, run) if share else context)


@login_required
def run_prompts_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = Run.objects.filter(pk=run_id).select_related("team").first()
    if run is None or perms.role_in(request.user, run.team_id) is None:
        raise Http404("not found")
    return render_prompts_page(request, run, share=None)


@login_required
@ensure_csrf_cookie  # the page's JS posts notes and share links with the cookie's token
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = Run.objects.filter(pk=run_id).select_related("team", "experiment").first()
    role = perms.role_in(request.user, run.team_id) if run else None
    if run is None or role is None:
        raise Http404("not found")
    return render_run_page(request, run, role=role, share=None)
