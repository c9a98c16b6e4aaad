"""`/api/runs/<id>/rollouts/` (filtered, keyset-paginated list) and `/api/runs/<id>/rollouts/<rid>/`.

Written by the run-page engineer because the inspector needs it; the platform's own API
(studio.api.urls, included first in studio/urls.py) takes precedence if it defines these routes.

Every page walks an index that starts with `run` and ends with `id` ((run, step, id) or
(run, reward, id)) from the cursor on and stops after `limit` matches, so page 1 and page
1,000 cost the same and nothing counts or sorts the whole run. Criterion filters are an
EXISTS probe into RolloutScore by rollout id, so they ride along the same walk.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.http import Http404
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from studio.runs.access import viewable_run
from studio.runs.models import Rollout, RolloutScore, Run

ORDERS = {"-step": "step", "step": "step", "-reward": "reward", "reward": "reward"}
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
SUMMARY_FIELDS = (
    "id",
    "step",
    "prompt_id",
    "sample_index",
    "reward",
    "advantage",
    "num_tokens",
    "finish_reason",
    "scores",
    "preview",
)


def _number(params, name: str, cast=float):
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        return cast(raw)
    except ValueError:
        raise ValidationError({name: f"must be a number, got {raw!r}"}) from None


def encode_cursor(value: float, row_id: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([value, row_id]).encode()).decode()


def decode_cursor(raw: str) -> tuple[float, int]:
    try:
        value, row_id = json.loads(base64.urlsafe_b64decode(raw.encode()))
        return float(value), int(row_id)
    except (ValueError, TypeError):
        raise ValidationError({"cursor": "not a cursor this endpoint gave out"}) from None


def filtered(run: Run, params) -> QuerySet:
    """The run's rollouts that pass the query-string filters, unordered."""
    qs = Rollout.objects.filter(run=run)
    for name, lookup, cast in (
        ("step_min", "step__gte", int),
        ("step_max", "step__lte", int),
        ("reward_min", "reward__gte", float),
        ("reward_max", "reward__lte", float),
    ):
        value = _number(params, name, cast)
        if value is not None:
            qs = qs.filter(**{lookup: value})
    if params.get("finish_reason"):
        qs = qs.filter(finish_reason=params["finish_reason"])
    if params.get("prompt_id"):
        qs = qs.filter(prompt_id=params["prompt_id"])
    if params.get("criterion"):
        scores = RolloutScore.objects.filter(rollout=OuterRef("pk"), criterion=params["criterion"])
        low, high = _number(params, "score_min"), _number(params, "score_max")
        if low is not None:
            scores = scores.filter(score__gte=low)
        if high is not None:
            scores = scores.filter(score__lte=high)
        qs = qs.filter(Exists(scores))
    if params.get("q"):
        # The prompt and completion as stored JSON text: one substring test per row walked.
        text = params["q"]
        qs = qs.annotate(_completion=Cast("completion", TextField()), _prompt=Cast("prompt", TextField())).filter(
            Q(_completion__icontains=text) | Q(_prompt__icontains=text)
        )
    return qs


def page(run: Run, params) -> dict[str, Any]:
    """One keyset page: {"results": [summaries], "next_cursor": str | None}."""
    order = params.get("order") or "-step"
    if order not in ORDERS:
        raise ValidationError({"order": f"must be one of {', '.join(ORDERS)}, got {order!r}"})
    limit = _number(params, "limit", int)
    limit = DEFAULT_LIMIT if limit is None else limit
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError({"limit": f"must be between 1 and {MAX_LIMIT}"})
    field, descending = ORDERS[order], order.startswith("-")
    qs = filtered(run, params)
    if params.get("cursor"):
        value, row_id = decode_cursor(params["cursor"])
        beyond = "lt" if descending else "gt"
        qs = qs.filter(Q(**{f"{field}__{beyond}": value}) | Q(**{field: value, f"id__{beyond}": row_id}))
    sign = "-" if descending else ""
    rows = list(qs.order_by(f"{sign}{field}", f"{sign}id").only(*SUMMARY_FIELDS)[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows else None
    return {
        "results": [r.summary() for r in rows],
        "next_cursor": encode_cursor(getattr(last, field), last.pk) if more and last else None,
    }


def detail(rollout: Rollout) -> dict[str, Any]:
    """The whole rollout, plus the other completions of its group (same step and prompt)."""
    group = Rollout.objects.filter(run_id=rollout.run_id, step=rollout.step, prompt_id=rollout.prompt_id)
    return {
        **rollout.summary(),
        "prompt": rollout.prompt,
        "completion": rollout.completion,
        "scores": rollout.scores,
        "logprobs": rollout.logprobs,
        "group": [{**g.summary(), "completion": g.completion} for g in group.order_by("sample_index", "id")],
    }


def _run_for(request: Request, run_id: int) -> Run:
    run = viewable_run(request.user, run_id, share_token=request.query_params.get("share"))
    if run is None:
        raise Http404("not found")
    return run


class RolloutListView(APIView):
    permission_classes = [AllowAny]  # viewable_run decides: team members, or a live share link

    def get(self, request: Request, run_id: int) -> Response:
        return Response(page(_run_for(request, run_id), request.query_params))


class RolloutDetailView(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request, run_id: int, rollout_id: int) -> Response:
        run = _run_for(request, run_id)
        rollout = Rollout.objects.filter(run=run, pk=rollout_id).first()
        if rollout is None:
            raise Http404("not found")
        return Response(detail(rollout))
