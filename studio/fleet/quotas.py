"""Per-team limits (TeamQuota, set by the operator in the Django admin) as the queue applies them, and in words.

A run of a team at a limit stays queued and its page says which limit holds it ("team ml-a has 4 of its 4
GPUs in use"); it starts when the team is under it again. The worker asks `refusal` in the same transaction
that leases the run's GPUs and marks it running (workers.launch.claim), after `lock` has locked the team's
row: on PostgreSQL two pool processes claiming runs of one team queue on that row lock, and the second
counts the first's run; on SQLite every transaction takes the write lock at BEGIN (settings: IMMEDIATE), so
claims are one at a time anyway. Two runs launched at once therefore cannot both take a team's last place.

What counts:
- running runs: the team's runs a worker of the studio runs (an ingested run trains elsewhere);
- GPUs: what the team's running runs lease (studio.fleet.leases.team_gpus; a share of a shared GPU counts as
  its part). A run that leases no GPU (a CPU machine, a Ray run) is not held back by the GPU limits;
- GPU-hours: studio.runs.usage.gpu_seconds_used since 00:00 UTC today, or since the 1st of this month (UTC).
  A limit is checked when a run starts: a run that has started runs on past it (nothing is stopped midway).

A change of limits applies at the next try of each waiting run (every settings.GPU_WAIT_RETRY_S): the admin
clears what the team's waiting runs said (`limits_changed`), so their pages give the new limits at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from studio.accounts.models import Team
from studio.fleet import leases
from studio.fleet.models import TeamQuota
from studio.runs import events, usage
from studio.runs.models import QUEUED, RUNNING, STUDIO_SOURCE, Run

WAITING = "waiting for its team's limits: "  # how a run held back by them says so, before refusal's words
EPSILON = 1e-9  # shares are 1/N: 4 quarters are 4 GPUs, not 3.9999999


def lock(team_id: int) -> TeamQuota | None:
    """The team's limits, its row locked until the caller's transaction ends (None: the team has no limits,
    so there is nothing to race for). Call inside transaction.atomic."""
    return TeamQuota.objects.select_for_update().select_related("team").filter(team_id=team_id).first()


def running_runs(team_id: int) -> int:
    return Run.objects.filter(team_id=team_id, state=RUNNING, source=STUDIO_SOURCE).count()


def gpu_hours_used(team: Team, since: datetime) -> float:
    """GPU-hours the team's runs used since `since` (studio.runs.usage: ended attempts' GPU-seconds, and the
    running ones' so far)."""
    return usage.gpu_seconds_used(team, since) / 3600.0


def day_start(now: datetime | None = None) -> datetime:
    now = timezone.now() if now is None else now
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: datetime | None = None) -> datetime:
    return day_start(now).replace(day=1)


def _n(value: float) -> str:
    """4 → '4', 3.75 → '3.75', 24.333 → '24.33'."""
    return f"{round(value, 2):g}"


def _gpus(value: float) -> str:
    return f"{_n(value)} GPU{'' if abs(value - 1) < EPSILON else 's'}"


def refusal(quota: TeamQuota | None, gpus_needed: float = 0.0, now: datetime | None = None) -> str:
    """Why the team of `quota` may not start a run that leases `gpus_needed` GPUs now, in words; "" when it may.
    Reads the team's running runs, its GPU leases and, where a GPU-hours limit is set, its usage (the day and
    the month of `now`, default now)."""
    if quota is None or quota.is_unlimited:
        return ""
    name = quota.team.name
    if quota.max_running_runs is not None:
        running = running_runs(quota.team_id)
        if running >= quota.max_running_runs:
            limit = quota.max_running_runs
            return (f"team {name} has {running} of its {limit} run{'' if limit == 1 else 's'} at once running; "
                    "it starts when one of them ends")  # fmt: skip
    if gpus_needed <= 0:
        return ""
    if quota.max_gpus is not None:
        held = leases.team_gpus(quota.team_id)
        if gpus_needed > quota.max_gpus + EPSILON:
            return (f"this run needs {_gpus(gpus_needed)}, more than team {name}'s limit of {_gpus(quota.max_gpus)}: "
                    "it starts only if the limit is raised")  # fmt: skip
        if held + gpus_needed > quota.max_gpus + EPSILON:
            need = "" if held >= quota.max_gpus - EPSILON else f"; this run needs {_gpus(gpus_needed)}"
            return f"team {name} has {_n(held)} of its {_gpus(quota.max_gpus)} in use{need}"
    for limit, since, when, again in (
        (quota.gpu_hours_per_day, day_start(now), "today", "at 00:00 UTC"),
        (quota.gpu_hours_per_month, month_start(now), "this month", "on the 1st (UTC)"),
    ):
        if limit is not None and (used := gpu_hours_used(quota.team, since)) >= limit - EPSILON:
            return (f"team {name} has used {_n(used)} of its {_n(limit)} GPU-hours {when} (UTC); "
                    f"it starts when the count starts again {again}")  # fmt: skip
    return ""


def limits_changed(team_id: int) -> list[int]:
    """The operator changed the team's limits: its waiting runs drop what they said (their pages then ask the
    limits again: studio.runs.queueing) and log the change; each is tried again at its next retry. Their ids."""
    waiting = list(Run.objects.filter(team_id=team_id, state=QUEUED, source=STUDIO_SOURCE).exclude(waiting_for="")
                   .values_list("pk", flat=True))  # fmt: skip
    for run_id in waiting:
        with transaction.atomic():
            if Run.objects.filter(pk=run_id, state=QUEUED).update(waiting_for=""):
                events.record(run_id, [events.status_item(QUEUED, "the team's limits were changed: tried again")])
    return waiting


@dataclass(frozen=True)
class Limit:
    """One limit of a team as its members read it (the fleet page, /api/fleet/quota/)."""

    name: str
    limit: float | None
    used: float
    words: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "limit": self.limit, "used": round(self.used, 4), "words": self.words}


def summary(team: Team, now: datetime | None = None) -> list[Limit]:
    """Each limit of the team with what it uses now; the GPU-hours read studio.runs.usage only when limited."""
    quota = TeamQuota.objects.filter(team=team).first() or TeamQuota(team=team)
    team_id = team.pk
    runs, gpus = running_runs(team_id), leases.team_gpus(team_id)
    rows = [
        Limit("max_running_runs", quota.max_running_runs, runs, _of(_n(runs), quota.max_running_runs, "runs running")),
        Limit("max_gpus", quota.max_gpus, gpus, _of(_n(gpus), quota.max_gpus, "GPUs in use")),
    ]
    for name, limit, since, when in (
        ("gpu_hours_per_day", quota.gpu_hours_per_day, day_start(now), "today"),
        ("gpu_hours_per_month", quota.gpu_hours_per_month, month_start(now), "this month"),
    ):
        if limit is None:
            rows.append(Limit(name, None, 0.0, f"no limit on GPU-hours {when}"))
        else:
            used = gpu_hours_used(team, since)
            rows.append(Limit(name, limit, used, f"{_n(used)} of {_n(limit)} GPU-hours used {when} (UTC)"))
    return rows


def _of(used: str, limit: float | None, what: str) -> str:
    """'3 of 4 GPUs in use', or '3 GPUs in use (no limit)'."""
    return f"{used} {what} (no limit)" if limit is None else f"{used} of {_n(limit)} {what}"
