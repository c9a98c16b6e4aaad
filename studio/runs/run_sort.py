"""Sorting a runs list by a metric's last value (issue 40: "the runs list can sort by them", the `suite/<task>/...`
scores a training-time suite writes): `?sort=<key>` ascending, `?sort=-<key>` descending, any metric key a run
reports (`suite/sums/pass@1`, `reward/mean`, `eval/pass@4`). A run's value is the one at its highest step; runs
without the metric come last either way, newest first among themselves.

One query: the value is a correlated subquery per run that reads the (run, key, step) index of MetricPoint
backwards and stops at its first row, so the list costs what it did plus one index probe per listed run."""

from __future__ import annotations

from django.db.models import F, OuterRef, QuerySet, Subquery

from studio.lib.params import QueryError
from studio.runs.models import MetricPoint, Run

SORT = "sort"
SORT_VALUE = "sort_value"  # the annotation a sorted list's runs carry: the metric's last value, or None
KEY_CHARS = MetricPoint._meta.get_field("key").max_length
# What `?sort=` may be, as the API schema states it: empty, or an optional "-" and a key of 1..KEY_CHARS characters
# that starts with no "-" (the direction's mark) and holds no control characters (no metric key has them).
PATTERN = rf"^(-?[^-\x00-\x1f][^\x00-\x1f]{{0,{KEY_CHARS - 1}}})?$"


def metric_key(raw: str | None) -> tuple[str, bool] | None:
    """The metric key and whether descending of a `?sort=` value (taken as given: a page trims what was typed);
    None without one. QueryError (400 naming `sort`) for what PATTERN refuses."""
    if not raw:
        return None
    descending = raw.startswith("-")
    key = raw[1:] if descending else raw
    if not key or key.startswith("-"):
        raise QueryError(SORT, "must name a metric key, e.g. suite/<task>/pass@1 (one leading - sorts descending)")
    if len(key) > KEY_CHARS:
        raise QueryError(SORT, f"a metric key is at most {KEY_CHARS} characters")
    if any(ord(c) < 32 for c in key):
        raise QueryError(SORT, "a metric key has no control characters")
    return key, descending


def by_metric(runs: QuerySet[Run], raw: str | None) -> QuerySet[Run]:
    """`runs` ordered by the `?sort=` metric's last value (see the module docstring), each carrying it as
    `sort_value`; unchanged without `?sort=`."""
    parsed = metric_key(raw)
    if parsed is None:
        return runs
    key, descending = parsed
    last = MetricPoint.objects.filter(run=OuterRef("pk"), key=key).order_by("-step", "-id").values("value")[:1]
    value = F(SORT_VALUE)
    order = value.desc(nulls_last=True) if descending else value.asc(nulls_last=True)
    return runs.annotate(**{SORT_VALUE: Subquery(last)}).order_by(order, "-created", "-pk")
