"""What a queued run waits behind, in words for its page: no worker serving its queue, its team's limits
(studio.fleet.quotas: "team ml-a has 4 of its 4 GPUs in use"), or every
place on those workers taken (by how many runs, its own team's by name, and by the model servers that hold
places, each in words: studio.fleet.holders; how many others queued), or nothing but a
worker taking its message. A run waiting for GPUs says so itself (Run.waiting_for, written by the
worker that could not lease them); this covers the runs no worker has looked at yet."""

from __future__ import annotations

from studio.fleet import quotas
from studio.fleet.holders import live_servers, server_words
from studio.fleet.models import TeamQuota
from studio.fleet.queues import no_worker, serving, task_queue
from studio.runs import placement
from studio.runs.lifecycle import task_for
from studio.runs.models import QUEUED, RUNNING, STUDIO_SOURCE, Run

MAX_NAMED = 3  # running runs named in the text; more are counted


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def waits_behind(run: Run, name_runs: bool = True) -> str:
    """Why `run` is still queued, or "" when it is not queued, says it itself, or is not the studio's to run.
    `name_runs`: name the running runs of its own team (for its members; a share link's reader gets counts)."""
    if run.state != QUEUED or run.waiting_for or run.source != STUDIO_SOURCE:
        return ""
    queue = task_queue(task_for(run))
    workers = serving(queue)
    if not workers:
        return f"waiting for a worker: {no_worker(queue)}"
    # Its team's limits first (studio.fleet.quotas): a free place does not start a run its team may not start.
    # A run counts as its whole GPUs here; the worker, which knows whether it shares them, says it precisely.
    gpus = placement.local_gpus(run.spec, run.kind) if any(node.gpus for node in workers) else 0
    if limited := quotas.refusal(TeamQuota.objects.select_related("team").filter(team_id=run.team_id).first(), gpus):
        return quotas.WAITING + limited
    places = sum(node.concurrency for node in workers)
    hostnames = [node.hostname for node in workers]
    running = list(Run.objects.filter(state=RUNNING, worker__in=hostnames).order_by("pk")
                   .values_list("pk", "name", "team_id"))  # fmt: skip
    served = live_servers(hostnames)  # a model server's task holds a place as a run does
    others = Run.objects.filter(state=QUEUED, source=STUDIO_SOURCE).exclude(pk=run.pk).count()
    queued = f"; {_plural(others, 'other run')} queued" if others else ""
    if len(running) + len(served) < places:
        free = _plural(places - len(running) - len(served), "free place")
        return f"waiting for a worker to take it ({free} on the {queue!r} queue{queued})"
    hosts = ", ".join(hostnames)
    by = [_plural(len(running), "running run")] if running else []
    if running and name_runs:
        by[0] += f" ({_which(running, run.team_id)})"
    by += [server_words(server, run.team_id, name=name_runs) for server in served]
    taken = f"{'is' if places == 1 else 'are all'} taken by {' and '.join(by) or 'nothing the studio knows of'}"
    return f"waiting for a free worker: the {queue!r} queue's {_plural(places, 'place')} ({hosts}) {taken}{queued}"


def _which(running: list[tuple[int, str, int]], team_id: int) -> str:
    """'#1 demo, #4 sweep-2 and 1 of another team': the team's own runs by number and name, others counted."""
    shown = [f"#{pk} {name}" for pk, name, team in running if team == team_id][:MAX_NAMED]
    rest = len(running) - len(shown)
    if rest:
        own_left = sum(team == team_id for _, _, team in running) - len(shown)
        shown.append(f"{rest} more" if own_left else f"{rest} of {'another team' if rest == 1 else 'other teams'}")
    return ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]
