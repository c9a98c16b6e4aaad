"""Filter and keyset-paginate a run's rollouts.

Pages are cut by (order value, id) > cursor instead of OFFSET, so page 1,000 of a
run with a million rollouts costs what page 1 costs: an index range scan on
(run, step, id) or (run, reward, id). The criterion filter goes through
RolloutScore's (run, criterion, score) index.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast

from studio.runs.models import Rollout, RolloutScore

ORDERS = {"step": "step", "-step": "step", "reward": "reward", "-reward": "reward"}
MAX_LIMIT = 500


class QueryError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _number(params, name: str, cast=float):
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        return cast(raw)
    except ValueError:
        raise QueryError(name, f"must be a number, got {raw!r}") from None


def encode_cursor(value: Any, pk: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([value, pk]).encode()).decode()


def decode_cursor(raw: str) -> tuple[Any, int]:
    try:
        value, pk = json.loads(base64.urlsafe_b64decode(raw.encode()))
        return value, int(pk)
    except (ValueError, TypeError):
        raise QueryError("cursor", "not a cursor this endpoint gave out") from None


def filtered(run_id: int, params) -> QuerySet[Rollout]:
    rows = Rollout.objects.filter(run_id=run_id)
    for name, lookup, cast in (("step_min", "step__gte", int), ("step_max", "step__lte", int),
                               ("reward_min", "reward__gte", float), ("reward_max", "reward__lte", float)):  # fmt: skip
        value = _number(params, name, cast)
        if value is not None:
            rows = rows.filter(**{lookup: value})
    if params.get("finish_reason"):
        rows = rows.filter(finish_reason=params["finish_reason"])
    if params.get("prompt_id"):
        rows = rows.filter(prompt_id=params["prompt_id"])
    if params.get("q"):
        rows = rows.annotate(completion_text=Cast("completion", TextField())).filter(
            completion_text__icontains=params["q"]
        )
    criterion = params.get("criterion")
    score_min, score_max = _number(params, "score_min"), _number(params, "score_max")
    if criterion:
        # EXISTS probes RolloutScore per rollout walked in page order and stops at the page's end;
        # `pk IN (subquery)` made SQLite materialise every matching id first (~0.5 s at 1M rows).
        scores = RolloutScore.objects.filter(rollout_id=OuterRef("pk"), criterion=criterion)
        if score_min is not None:
            scores = scores.filter(score__gte=score_min)
        if score_max is not None:
            scores = scores.filter(score__lte=score_max)
        rows = rows.filter(Exists(scores))
    elif score_min is not None or score_max is not None:
        raise QueryError("criterion", "score_min/score_max need a criterion")
    return rows


def page(run_id: int, params) -> dict[str, Any]:
    """{"results": [summaries], "next_cursor": str | None}."""
    order = params.get("order") or "step"
    if order not in ORDERS:
        raise QueryError("order", f"must be one of {', '.join(ORDERS)}")
    limit = _number(params, "limit", int) or 100
    limit = max(1, min(limit, MAX_LIMIT))
    field = ORDERS[order]
    descending = order.startswith("-")
    rows = filtered(run_id, params)
    if params.get("cursor"):
        value, pk = decode_cursor(params["cursor"])
        if descending:
            rows = rows.filter(Q(**{f"{field}__lt": value}) | Q(**{field: value, "pk__lt": pk}))
        else:
            rows = rows.filter(Q(**{f"{field}__gt": value}) | Q(**{field: value, "pk__gt": pk}))
    ordering = [f"-{field}", "-pk"] if descending else [field, "pk"]
    items = list(rows.order_by(*ordering).defer("prompt", "completion", "logprobs")[: limit + 1])
    next_cursor = None
    if len(items) > limit:
        items = items[:limit]
        last = items[-1]
        next_cursor = encode_cursor(getattr(last, field), last.pk)
    return {"results": [r.summary() for r in items], "next_cursor": next_cursor}
