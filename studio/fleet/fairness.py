"""Which queued run a free worker process starts: the fairest, not the oldest message.

Why here, at the worker, and not by holding runs back in the studio: every queued run already has its own
task message, and messages reach a worker in the order they were sent, so a team that launches a 20-trial
sweep (each trial an ordinary run, studio.runs.lifecycle.create_run) would put 20 messages ahead of another
team's one run. So a pool process that takes any run's message does not simply start that run: it starts the
first of `fair_order` that its team's limits (studio.fleet.quotas) and the free GPUs allow
(workers.launch.claim_fairly). The run whose message it was, if it must wait, gets a new message; the run
started in its place finds its own message later and does nothing with it. Nothing is held back in the
studio, so there is no "release" step to miss when a run ends: the next message any worker takes starts
the next fair run, and a waiting run's own message comes back every settings.GPU_WAIT_RETRY_S.

Fair: the team with the fewest runs running goes first, then the one holding the fewest GPUs, then the one
whose last start is the oldest (so with one place, where every team has none running when it frees, teams
take turns instead of the oldest run's team taking every turn), and the oldest run first within a team. Two
teams with queued runs therefore alternate as places free up, whatever either queued, and a run of a team at
its limit never blocks another team's. A run that needs more GPUs than are
free does not stop a smaller one from starting meanwhile (a two-GPU run waits for two free GPUs on one
worker, as before this existed).

Only runs with a task message of their own are started in another's place (Run.celery_task_id): an
evaluation suite's pairs are started by their suite's job.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from django.db.models import Max

from studio.fleet import leases
from studio.fleet.queues import task_queue
from studio.runs.lifecycle import task_for
from studio.runs.models import QUEUED, RUNNING, STUDIO_SOURCE, Run

CANDIDATES = 200  # queued runs read per pass, oldest first: a queue longer than this is served in that order


def team_load() -> Counter[int]:
    """{team id: its runs running on the studio's workers}."""
    return Counter(Run.objects.filter(state=RUNNING, source=STUDIO_SOURCE).values_list("team_id", flat=True))


def fair_order(queue: str, include: Run | None = None, limit: int = CANDIDATES) -> list[Run]:
    """The queued runs whose task goes to `queue`, fairest first (see the module doc). `include`: a run to
    consider whatever its message (the one whose message the caller took). One query for the runs, one for
    the running ones, one for the GPUs of each team with runs waiting, one for their last starts."""
    queued = list(Run.objects.filter(state=QUEUED, source=STUDIO_SOURCE).exclude(celery_task_id="")
                  .select_related("team").order_by("pk")[:limit])  # fmt: skip
    if include is not None and include.state == QUEUED and all(run.pk != include.pk for run in queued):
        queued.append(include)
    queued = [run for run in queued if task_queue(task_for(run)) == queue]
    running = team_load()
    teams = {run.team_id for run in queued}
    gpus = {team_id: leases.team_gpus(team_id) for team_id in teams}
    last = dict(Run.objects.filter(team_id__in=teams, started__isnull=False).values_list("team_id")
                .annotate(at=Max("started")))  # fmt: skip
    never = datetime.min.replace(tzinfo=UTC)
    return sorted(queued, key=lambda run: (running[run.team_id], gpus[run.team_id], last.get(run.team_id, never),
                                           run.pk))  # fmt: skip
