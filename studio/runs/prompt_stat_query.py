"""List a run's per-prompt statistics for the prompts view: sorted, filtered by status, keyset pages.

Pages are cut as the rollout list's are (studio.runs.rollout_query): (order value, id) past the
cursor, on a (run, field, id) index per sort key. A row carries the preview of its prompt's text,
read from the rollouts of its last step (the (run, step, prompt_id) index: one probe per row of the
page), and the tail of its history for a sparkline; a prompt's whole history is `detail`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q

from studio.lib.params import QueryError, number_param
from studio.runs.models import PromptStat, Rollout, Run
from studio.runs.prompt_stats import STATUS_NAMES
from studio.runs.rollout_query import keyset_page

# ?order= value -> the field it sorts by; "-" is descending. Each field has a (run, field, id) index.
ORDERS = {order: order.lstrip("-") for order in ("pass_rate", "-pass_rate", "pass_rate_std", "-pass_rate_std",
                                                  "draws", "-draws", "last_step", "-last_step")}  # fmt: skip
ORDER_TITLES = {
    "-last_step": "last seen, newest first",
    "last_step": "last seen, oldest first",
    "pass_rate": "pass rate, lowest first",
    "-pass_rate": "pass rate, highest first",
    "-pass_rate_std": "most uncertain first",
    "pass_rate_std": "least uncertain first",
    "-draws": "most drawn first",
    "draws": "least drawn first",
}
DEFAULT_ORDER = "-last_step"
STATUS = "status"  # ?status=<name>: one of STATUS_NAMES
MAX_LIMIT = 200
SPARK_POINTS = 60  # history entries a listed row carries: the sparkline's, the newest
# Ancestors a resumed run's previews are looked up in: its inherited rows' last steps are theirs.
LINEAGE_MAX = 20


def lineage(run: Run) -> list[int]:
    """The run's id, then those of the runs it was resumed from, newest first. One query each."""
    ids = [run.pk]
    parent = run.resumed_from_id
    while parent and parent not in ids and len(ids) < LINEAGE_MAX:
        ids.append(parent)
        parent = Run.objects.filter(pk=parent).values_list("resumed_from_id", flat=True).first()
    return ids


def previews(run_ids: list[int], rows: list[PromptStat]) -> dict[str, str]:
    """{prompt_id: preview of its text} for the rows whose last step's rollouts are stored.

    The first draw of a row in a step is named by its bare id (the "@k" repeats come after it),
    and sample 0 stands for the group: one indexed probe per row, all in one query."""
    if not rows:
        return {}
    wanted = Q()
    for row in rows:
        wanted |= Q(step=row.last_step, prompt_id=row.prompt_id)
    found = (
        Rollout.objects.filter(wanted, run_id__in=run_ids, sample_index=0)
        .order_by()
        .values_list("prompt_id", "run_prompt__preview")
    )
    return dict(found)


def summary(row: PromptStat, preview: str | None, points: int | None = SPARK_POINTS) -> dict[str, Any]:
    """A row as the API lists it; `points` history entries (the newest), all of them with None."""
    history = row.history if points is None else row.history[-points:]
    return {
        "prompt_id": row.prompt_id,
        "preview": preview or "",
        "draws": row.draws,
        "alpha": row.alpha,
        "beta": row.beta,
        "pass_rate": row.pass_rate,
        "pass_rate_std": row.pass_rate_std,
        "last_step": row.last_step,
        "status": row.status,
        "history": history,
        "history_length": len(row.history),
    }


def counts(run_id: int) -> dict[str, int]:
    """Prompts per status (every status named, 0 where none): the view's filter buttons."""
    found = dict(PromptStat.objects.filter(run_id=run_id).order_by().values_list("status").annotate(n=Count("pk")))
    return {name: found.get(name, 0) for name in STATUS_NAMES}


def page(run: Run, params) -> dict[str, Any]:
    """{"results": [summaries], "next_cursor": str | None, "counts": {status: n}}."""
    order = params.get("order") or DEFAULT_ORDER
    if order not in ORDERS:
        raise QueryError("order", f"must be one of {', '.join(ORDERS)}")
    status = params.get(STATUS) or ""
    if status and status not in STATUS_NAMES:
        raise QueryError(STATUS, f"must be one of {', '.join(STATUS_NAMES)}")
    limit = max(1, min(number_param(params, "limit", int) or 50, MAX_LIMIT))
    field, descending = ORDERS[order], order.startswith("-")
    rows = PromptStat.objects.filter(run_id=run.pk)
    if status:
        rows = rows.filter(status=status)
    items, next_cursor = keyset_page(rows, field, descending, params.get("cursor"), limit)
    texts = previews(lineage(run), items)
    return {
        "results": [summary(row, texts.get(row.prompt_id)) for row in items],
        "next_cursor": next_cursor,
        "counts": counts(run.pk),
    }


def detail(run: Run, prompt_id: str) -> dict[str, Any] | None:
    """One prompt's statistics with its whole stored history; None when the run has none for it."""
    row = PromptStat.objects.filter(run_id=run.pk, prompt_id=prompt_id).first()
    if row is None:
        return None
    return summary(row, previews(lineage(run), [row]).get(row.prompt_id), points=None)
