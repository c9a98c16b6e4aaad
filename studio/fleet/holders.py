"""What holds a GPU or a place of a queue, in words for a waiting run and the fleet page: a run, or a
model server (studio.serving), which a worker's `workers.serve_model` task keeps on one pool process
(and its GPU) until it has been idle for settings.SERVING_IDLE_S."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.utils import timezone

from studio.fleet.models import GpuLease
from studio.runs.models import Run
from studio.serving.models import LIVE_STATES, STOPPING, ModelServer
from studio.serving.refs import REF

HOLDING_STATES = (*LIVE_STATES, STOPPING)  # a server's task holds its place until it has stopped the process


def _minutes(seconds: float) -> str:
    minutes = max(0, round(seconds / 60))
    return "under a minute" if minutes == 0 else f"{minutes} min"


def idle_s(server: ModelServer) -> float:
    return max(0.0, (timezone.now() - server.last_used).total_seconds())


def stops_in_s(server: ModelServer) -> float:
    """Seconds until the idle stop ends it, if nobody uses it meanwhile."""
    return max(0.0, settings.SERVING_IDLE_S - idle_s(server))


def team_of(server: ModelServer) -> int | None:
    """The team of the run whose model it serves (its ref names the run), or None when that run is gone."""
    match = REF.match(server.ref)
    return Run.objects.filter(pk=int(match["run"])).values_list("team_id", flat=True).first() if match else None


def server_words(server: ModelServer, team_id: int | None = None, name: bool = True) -> str:
    """'a model server (run-12/step-40 on gpu@a, started by vera, idle 2 min, stops when idle in 8 min)'. With `team_id`
    (the reader's team), another team's model is not named: 'a model server of another team (on gpu@a, ...)';
    `name=False` (a share link's reader) names none."""
    other = team_id is not None and team_of(server) != team_id
    named = name and not other
    parts = [f"{server.ref} on {server.worker}" if named else f"on {server.worker}"]
    if named and server.started_by:
        parts.append(f"started by {server.started_by}")
    if server.state == STOPPING:
        parts.append("stopping")
    elif server.state != LIVE_STATES[1]:  # starting: no idle time yet
        parts.append("starting")
    else:
        parts.append(idle_words(server))
    return f"a model server{' of another team' if other and name else ''} ({', '.join(parts)})"


def lease_holder(lease: GpuLease | None, team_id: int | None = None) -> str:
    """Who holds a leased GPU: 'a model server (...)', or 'another run' (a run, or a lease that just ended)."""
    if lease is not None and lease.model_server_id:
        server = ModelServer.objects.filter(pk=lease.model_server_id).first()
        return server_words(server, team_id) if server else "a model server"
    return "another run"


def live_servers(workers: Sequence[str]) -> list[ModelServer]:
    """The model servers whose task holds a place on one of `workers` (taken by a worker, not yet stopped)."""
    return list(ModelServer.objects.filter(worker__in=list(workers), state__in=HOLDING_STATES).order_by("pk"))


def leasing_servers(workers: Sequence[str]) -> list[ModelServer]:
    """The model servers that hold a GPU of one of `workers`."""
    return list(ModelServer.objects.filter(gpu_leases__worker__in=list(workers), state__in=HOLDING_STATES)
                .distinct().order_by("pk"))  # fmt: skip


def live_servers_anywhere() -> list[ModelServer]:
    """Every model server that holds or is about to hold a place (starting, ready, stopping)."""
    return list(ModelServer.objects.filter(state__in=HOLDING_STATES).prefetch_related("gpu_leases").order_by("pk"))


def idle_words(server: ModelServer) -> str:
    """'idle 2 min, stops when idle in 8 min'."""
    return f"idle {_minutes(idle_s(server))}, stops when idle in {_minutes(stops_in_s(server))}"
