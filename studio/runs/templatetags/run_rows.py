"""`{% run_rows runs as rows %}`: the runs of a table (runs/table.html: the runs list, an experiment's
page, the home page), each with what its row offers the user: `row_actions`, the actions that can work
on it now (Run.action_refusals, the rule the run page and the API follow too) where the user may edit
its team, else none; `answer`, the refusal a form post without JavaScript got (pages.runs); and
`queue`, what a queued run waits for (its own word, else studio.runs.queueing).
Two queries for the whole table, not one per row (a few more per queued run)."""

from __future__ import annotations

from django import template
from django.db.models import Max

from studio.accounts import permissions as perms
from studio.runs import queueing
from studio.runs.models import QUEUED, Checkpoint

register = template.Library()


@register.simple_tag(takes_context=True)
def run_rows(context, runs) -> list:
    rows = list(runs)
    request = context.get("request")
    user = getattr(request, "user", None)
    editable = set(perms.editable_teams(user).values_list("pk", flat=True)) if user is not None else set()
    ids = [run.pk for run in rows if run.team_id in editable]
    newest = dict(Checkpoint.objects.filter(run_id__in=ids).values("run_id").annotate(step=Max("step"))
                  .values_list("run_id", "step"))  # fmt: skip
    answers = context.get("answers") or {}
    for run in rows:
        run.checkpoint_step = newest.get(run.pk)  # what Run.newest_checkpoint_step reads instead of a query
        run.row_actions = run.actions() if run.team_id in editable else []
        run.answer = answers.get(run.pk, "")
        run.queue = (run.waiting_for or queueing.waits_behind(run)) if run.state == QUEUED else ""
    return rows
