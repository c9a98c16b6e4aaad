"""A team's usage: its runs' recorded device-seconds, GPU-seconds and tokens (studio.runs.usage) summed per user,
per experiment and per month, and in all, with their cost at the operator's prices. What the usage page and
`GET /api/teams/<id>/usage/` show.

A run counts in the month it was launched (Run.created, in UTC), whole: a run that trains across midnight at the
end of a month is not split. A running run counts with what its worker has recorded so far. Every sum is one
aggregate query over the team's runs (four in all), never a loop over runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncMonth

from studio.accounts.models import Team
from studio.lib.params import QueryError
from studio.runs.models import Run
from studio.runs.usage import Prices

MONTH = re.compile(r"(\d{4})-(\d{2})")
SUMS = {
    "runs": Count("pk"),
    "device_seconds": Coalesce(Sum("device_seconds"), 0.0),
    "gpu_seconds": Coalesce(Sum("gpu_seconds"), 0.0),
    "tokens_generated": Coalesce(Sum("tokens_generated"), 0),
    "tokens_trained": Coalesce(Sum("tokens_trained"), 0),
}
NO_USER, NO_EXPERIMENT = "(deleted user)", "(no experiment)"


@dataclass(frozen=True)
class Period:
    """The months asked for: `start` and `end` (first days of months, both included; None: open)."""

    start: date | None = None
    end: date | None = None

    @classmethod
    def from_query(cls, params: Any) -> Period:
        """?from=YYYY-MM&to=YYYY-MM (either may be left out); a bad month is a QueryError naming it."""
        start, end = _month(params, "from"), _month(params, "to")
        if start and end and start > end:
            raise QueryError("to", f"must not be before from ({start:%Y-%m})")
        return cls(start, end)

    def runs(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        if self.start:
            runs = runs.filter(created__gte=datetime(self.start.year, self.start.month, 1, tzinfo=UTC))
        if self.end:
            year, month = (self.end.year + 1, 1) if self.end.month == 12 else (self.end.year, self.end.month + 1)
            runs = runs.filter(created__lt=datetime(year, month, 1, tzinfo=UTC))
        return runs

    def as_query(self) -> dict[str, str]:
        return {k: f"{v:%Y-%m}" for k, v in (("from", self.start), ("to", self.end)) if v}


def _month(params: Any, name: str) -> date | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    found = MONTH.fullmatch(raw)
    if not found or not 1 <= int(found.group(2)) <= 12 or int(found.group(1)) < 1:
        raise QueryError(name, f"must be a month as YYYY-MM, got {raw!r}")
    return date(int(found.group(1)), int(found.group(2)), 1)


def team_usage(team: Team, period: Period | None = None, prices: Prices | None = None) -> dict[str, Any]:
    """{total, by_user, by_experiment, by_month, prices} of the team's runs launched in `period`: each row the
    runs counted and their sums (device_seconds, gpu_seconds, cpu_seconds, tokens_generated, tokens_trained) and
    cost (None where nothing is priced). Rows by the largest device time first; months oldest first."""
    period, prices = period or Period(), prices or Prices.from_settings()
    runs = period.runs(Run.objects.filter(team=team)).order_by()  # no ORDER BY: GROUP BY the named columns only
    users = runs.values(who=F("created_by__username")).annotate(**SUMS).order_by("-device_seconds", "who")
    experiments = runs.values(experiment_ref=F("experiment_id"), title=F("experiment__name")).annotate(**SUMS)
    months = runs.annotate(month=TruncMonth("created", tzinfo=UTC)).values("month").annotate(**SUMS)
    return {
        "total": _row(runs.aggregate(**SUMS), prices),
        "by_user": [_row(r, prices, label=r["who"] or NO_USER) for r in users],
        "by_experiment": [
            _row(r, prices, label=r["title"] or NO_EXPERIMENT, experiment=r["experiment_ref"])
            for r in experiments.order_by("-device_seconds", "title")
        ],
        "by_month": [_row(r, prices, label=f"{r['month']:%Y-%m}") for r in months.order_by("month")],
        "prices": {
            "gpu_hour": prices.gpu_hour,
            "cpu_hour": prices.cpu_hour,
            "currency": prices.currency if prices.priced else None,
        },  # fmt: skip
        "period": period.as_query(),
    }


def _row(sums: dict[str, Any], prices: Prices, **extra: Any) -> dict[str, Any]:
    device, gpu = float(sums["device_seconds"]), float(sums["gpu_seconds"])
    return {
        **extra,
        "runs": int(sums["runs"]),
        "device_seconds": device,
        "gpu_seconds": gpu,
        "cpu_seconds": max(0.0, device - gpu),
        "tokens_generated": int(sums["tokens_generated"]),
        "tokens_trained": int(sums["tokens_trained"]),
        "cost": prices.cost(gpu, device),
    }
