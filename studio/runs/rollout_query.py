"""Filter and keyset-paginate a run's rollouts.

Pages are cut by (order value, id) > cursor instead of OFFSET, so page 1,000 of a
run with a million rollouts costs what page 1 costs: an index range scan on
(run, <order field>, id), one index per sort key (step, reward, num_tokens, advantage).
Ties in the order value (many rollouts share a step, a length, a 0/1 reward) are broken
by id, which is why every one of those indexes ends with it. The text search reads the
completion and, through the run's few distinct prompts (RunPrompt), the prompt. The criterion filter goes
through RolloutScore's (run, criterion, score) index; the note filter reads the run's
few noted rollout ids through Note's (run, tag) index.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast, Left

from studio.lib import json_limits
from studio.lib.params import QueryError, flag_param, number_param
from studio.runs import episodes
from studio.runs.models import EVAL_SPLIT, TRAIN_SPLIT, VALIDATION_SPLIT, Rollout, RolloutScore, RunPrompt
from studio.sharing.models import Note

# ?order= value -> the field it sorts by; "-" is descending. Each field has a (run, field, id) index.
ORDERS = {order: order.lstrip("-") for order in ("step", "-step", "reward", "-reward", "num_tokens", "-num_tokens",
                                                  "advantage", "-advantage")}  # fmt: skip
# Newest first: what the inspector shows, so a client that sends no order sees the same list.
DEFAULT_ORDER = "-step"
MAX_LIMIT = 500

# The filters, as data: the inspector applies the same ones to rollouts that arrive live on the
# websocket (studio.sharing.client_rules hands them to it), so they must stay data it can read.
# ?<param>=<number>: the rollout's <field> is at least ("min") or at most ("max") the number.
BOUNDS = {
    "step_min": ("step", "min", int),
    "step_max": ("step", "max", int),
    "reward_min": ("reward", "min", float),
    "reward_max": ("reward", "max", float),
    "turns_min": ("num_turns", "min", int),
    "turns_max": ("num_turns", "max", int),
}
EQUALS = ("finish_reason", "prompt_id")  # ?<field>=<value>: the field equals it
FLAGS = ("trained", "ended_at_limit", "hinted")  # ?<field>=true|false, in the words of flag_param
COUNTS = ("tool_errors",)  # ?<field>=true: the count is above 0; false: it is 0
# ?<param>=<name>: <field>, a list of names in summaries, holds it (studio.runs.episodes packs the column).
MEMBERS = {"tool": "tools_used"}
# ?criterion=<name>: scored on that criterion, within score_min..score_max when given.
CRITERION, SCORE_MIN, SCORE_MAX = "criterion", "score_min", "score_max"
# ?prompt=<row id>: the rollouts of that dataset row, under its id or a repeat's "<id>@<k>" (a row
# drawn k times in one step: trainers.run.loop names its groups so). ?prompt_id= names one group only.
PROMPT, REPEAT_MARK = "prompt", "@"
TEXT = "q"  # a substring of the whole prompt or completion, any case: summaries carry only previews
HAS_NOTE, NOTE_TAG = "has_note", "note_tag"
# ?split=train | validation | eval | all: a training run's rollouts (the default, so per-step views never
# mix in validation samples), the held-out prompts' samples (trainers.run.validation), an evaluation run's
# samples (trainers.run.evaluate: the default of a run of kind "eval", whose rollouts are all of that split),
# or every split.
SPLIT, SPLIT_ALL = "split", "all"
SPLIT_CHOICES = (TRAIN_SPLIT, VALIDATION_SPLIT, EVAL_SPLIT, SPLIT_ALL)
DEFAULT_SPLIT = TRAIN_SPLIT


def default_split(kind: str) -> str:
    """The split a run's rollout list shows without ?split=: its evaluation samples for an evaluation run
    (it has no others), its training rollouts otherwise."""
    return EVAL_SPLIT if kind == "eval" else DEFAULT_SPLIT


def opening_split(run_id: int, kind: str = "train") -> str:
    """The split the run page's rollout list opens on: an evaluation run's own (even before its first sample
    arrives, so the live list shows them), else training, unless the run has validation rollouts
    and no training ones yet (a step-0 validation before the first step: the list said "No rollouts yet"
    over 40 rollouts, issue 39); then both, so the training rollouts join the list as they arrive."""
    if kind == "eval":
        return EVAL_SPLIT
    rows = Rollout.objects.filter(run_id=run_id)
    if rows.filter(split=TRAIN_SPLIT).exists() or not rows.filter(split=VALIDATION_SPLIT).exists():
        return DEFAULT_SPLIT
    return SPLIT_ALL


def encode_cursor(value: Any, pk: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([value, pk]).encode()).decode()


def decode_cursor(raw: str) -> tuple[Any, int]:
    try:
        value, pk = json_limits.loads(base64.urlsafe_b64decode(raw.encode()))
        pk = int(pk)
    except (ValueError, TypeError):
        raise QueryError("cursor", "not a cursor this endpoint gave out") from None
    # Every sort key is a number: anything else would reach the database as a bad comparison.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise QueryError("cursor", "not a cursor this endpoint gave out")
    return value, pk


def past_cursor(rows: QuerySet, field: str, descending: bool, cursor: str) -> QuerySet:
    """The rows whose (field, pk) come after the cursor's in the page order. The redundant
    `field <= value` (>= ascending) is the index range's bound, so the scan starts at the cursor
    instead of skipping every earlier row: SQLite derives it from the OR by itself, PostgreSQL's
    planner does not."""
    value, pk = decode_cursor(cursor)
    if descending:
        return rows.filter(Q(**{f"{field}__lt": value}) | Q(**{field: value, "pk__lt": pk}), **{f"{field}__lte": value})
    return rows.filter(Q(**{f"{field}__gt": value}) | Q(**{field: value, "pk__gt": pk}), **{f"{field}__gte": value})


def keyset_page(
    rows: QuerySet, field: str, descending: bool, cursor: str | None, limit: int
) -> tuple[list, str | None]:
    """One page of `rows` in (field, pk) order, past `cursor` (None: from the start): at most
    `limit` rows, and the cursor of the page after them (None: this is the last)."""
    if cursor:
        rows = past_cursor(rows, field, descending, cursor)
    items = list(rows.order_by(*([f"-{field}", "-pk"] if descending else [field, "pk"]))[: limit + 1])
    if len(items) <= limit:
        return items, None
    items = items[:limit]
    return items, encode_cursor(getattr(items[-1], field), items[-1].pk)


def filtered(run_id: int, params, default: str = DEFAULT_SPLIT) -> QuerySet[Rollout]:
    """The run's rollouts that `params` select; `default`: the split without ?split= (default_split)."""
    rows = Rollout.objects.filter(run_id=run_id)
    split = (params.get(SPLIT) or "").strip() or default
    if split not in SPLIT_CHOICES:
        raise QueryError(SPLIT, f"must be one of {', '.join(SPLIT_CHOICES)}")
    if split != SPLIT_ALL:
        rows = rows.filter(split=split)
    for name, (field, bound, cast) in BOUNDS.items():
        value = number_param(params, name, cast)
        if value is not None:
            rows = rows.filter(**{f"{field}__{'gte' if bound == 'min' else 'lte'}": value})
    for name in EQUALS:
        if params.get(name):
            rows = rows.filter(**{name: params[name]})
    for name in FLAGS:
        if (params.get(name) or "").strip():
            rows = rows.filter(**{name: flag_param(params, name)})
    for name in COUNTS:
        if (params.get(name) or "").strip():
            rows = rows.filter(**{f"{name}__gt": 0}) if flag_param(params, name) else rows.filter(**{name: 0})
    for name, field in MEMBERS.items():
        if (params.get(name) or "").strip():
            rows = rows.filter(**{f"{field}__contains": episodes.tool_pattern(params[name].strip())})
    prompt = (params.get(PROMPT) or "").strip()
    if prompt:
        # Left(...) = "<id>@", not startswith: LIKE ignores case on SQLite, and "A@2" is not row "a".
        head = Left("prompt_id", len(prompt) + len(REPEAT_MARK))
        rows = rows.annotate(prompt_head=head).filter(Q(prompt_id=prompt) | Q(prompt_head=prompt + REPEAT_MARK))
    if params.get(TEXT):
        rows = _with_text(rows, run_id, params[TEXT])
    criterion = params.get(CRITERION)
    score_min, score_max = number_param(params, SCORE_MIN), number_param(params, SCORE_MAX)
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
    return _with_notes(rows, run_id, params)


def _with_text(rows: QuerySet[Rollout], run_id: int, text: str) -> QuerySet[Rollout]:
    """Rollouts whose completion or prompt holds `text`, any case.

    The prompts are matched first, on the run's distinct prompts (a few hundred rows where the
    rollouts are millions; trigram-indexed on PostgreSQL, see migration 0005), and the rollouts
    then by `run_prompt IN (those)`: never the prompt's text once per rollout.
    """
    prompts = RunPrompt.objects.filter(run_id=run_id).annotate(text=Cast("content", TextField()))
    matching = prompts.filter(text__icontains=text).values("pk")
    return rows.annotate(completion_text=Cast("completion", TextField())).filter(
        Q(completion_text__icontains=text) | Q(run_prompt__in=matching)
    )


def _with_notes(rows: QuerySet[Rollout], run_id: int, params) -> QuerySet[Rollout]:
    """`has_note=1`: rollouts that carry any note; `note_tag=x`: a note tagged x.

    Only notes of this run count, the very set its notes list shows to whoever may read the run
    (members and share-link guests alike), so the filter reveals nothing that list does not.
    """
    tag = (params.get(NOTE_TAG) or "").strip()
    if not tag and not flag_param(params, HAS_NOTE):
        return rows
    # `pk IN (noted ids)`, not EXISTS as for criteria: notes are written by hand, so the set is small
    # (read once through Note's (run, tag) index, then rows by primary key), while EXISTS walks the
    # run in page order until a page is full: every rollout when a tag is rare. Worse, with no
    # statistics on the notes table (the studio never runs ANALYZE) SQLite probed through Note's
    # (run, created) index, reading all the run's notes per rollout walked: 130 ms at 20,000
    # rollouts and 80 notes, against 0.5 ms for IN.
    notes = Note.objects.filter(run_id=run_id, rollout__isnull=False)
    if tag:
        notes = notes.filter(tag=tag)
    return rows.filter(pk__in=notes.values("rollout_id"))


def page(run_id: int, params, default: str = DEFAULT_SPLIT) -> dict[str, Any]:
    """{"results": [summaries], "next_cursor": str | None}; `default`: the split without ?split=."""
    order = params.get("order") or DEFAULT_ORDER
    if order not in ORDERS:
        raise QueryError("order", f"must be one of {', '.join(ORDERS)}")
    limit = number_param(params, "limit", int) or 100
    limit = max(1, min(limit, MAX_LIMIT))
    field = ORDERS[order]
    descending = order.startswith("-")
    rows = filtered(run_id, params, default)
    rows = rows.select_related("run_prompt").defer(
        "completion", "logprobs", "turns", "policy_versions", "run_prompt__content"
    )
    items, next_cursor = keyset_page(rows, field, descending, params.get("cursor"), limit)
    return {"results": [r.summary() for r in items], "next_cursor": next_cursor}
