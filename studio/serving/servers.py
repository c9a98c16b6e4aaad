"""The web side of a model server: find the ready process for a model, or ask a worker to start one
and wait for it (started on first use); stamp its use so the worker keeps it warm; end the servers
whose worker is gone, so their places and GPUs are not held by a process that no longer exists.

The web process never loads a model: it enqueues `workers.serve_model` by name on the queue the fleet
accounts for (settings.CELERY_TASK_ROUTES) and reads the row the worker writes.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from studio.celery import SERVE_MODEL_TASK, app
from studio.fleet import leases, queues
from studio.fleet.models import WorkerNode
from studio.serving.models import FAILED, LIVE_STATES, READY, STARTING, STOPPED, STOPPING, ModelServer
from studio.serving.refs import ModelRef

POLL_S = 0.25


class NotServing(Exception):
    """No process answers for the model; the message says why (no worker, a failed start)."""


def request_start(ref: ModelRef, by: str = "") -> ModelServer:
    """The model's row; a start is sent to the workers when none is starting or running. `by`: whose
    request starts it (the fleet page and a run waiting behind it say so)."""
    with transaction.atomic():
        server, _ = ModelServer.objects.select_for_update().get_or_create(
            ref=ref.name, defaults={"model_path": ref.model_path, "checkpoint": ref.checkpoint}
        )
        if server.state == READY or (server.state == STARTING and not _start_lost(server)):
            return server
        server.state, server.generation, server.error = STARTING, server.generation + 1, ""
        server.model_path, server.checkpoint, server.model_spec = ref.model_path, ref.checkpoint, ref.model_spec
        server.address = server.worker = server.engine = ""
        server.started, server.last_used, server.started_by = None, timezone.now(), by[:200]
        server.save()
        generation = server.generation
        transaction.on_commit(lambda: app.send_task(SERVE_MODEL_TASK, args=[server.pk, generation]))
    return server


def _start_lost(server: ModelServer) -> bool:
    """A start no worker took within the start timeout: its message is gone (an embedded broker keeps
    nothing across a restart), so waiting on it would wait forever; it is sent again."""
    waited = (timezone.now() - server.last_used).total_seconds()
    return not server.worker and waited > settings.SERVING_START_TIMEOUT_S


def sweep_lost_servers(timeout_s: float | None = None) -> list[int]:
    """End (failed, with the reason) the servers starting, ready or stopping on a worker that stopped or
    has been silent for over HEARTBEAT_TIMEOUT_S, and free the GPUs they leased; the next request for
    the model starts a new process. The same heartbeat rule as studio.runs.lifecycle.sweep_lost_runs."""
    timeout_s = settings.HEARTBEAT_TIMEOUT_S if timeout_s is None else timeout_s
    cutoff = timezone.now() - timedelta(seconds=timeout_s)
    holding = ModelServer.objects.filter(state__in=(*LIVE_STATES, STOPPING)).exclude(worker="")
    alive = set(WorkerNode.objects.filter(last_seen__gte=cutoff, stopped__isnull=True).values_list("hostname", flat=True))
    return [
        pk for pk, worker, generation in holding.exclude(worker__in=alive).values_list("pk", "worker", "generation")
        if end_lost_server(pk, generation, f"its worker {worker} stopped or sent no heartbeat for over {timeout_s:.0f} s")
    ]  # fmt: skip


def end_lost_server(server_id: int, generation: int, why: str) -> bool:
    """The server's process is gone (its worker, or its pool process, died): failed with `why`, its GPU
    lease freed. Only that start's row changes (`generation`): a newer start of the model is left alone."""
    with transaction.atomic():
        ended = ModelServer.objects.filter(pk=server_id, generation=generation,
                                           state__in=(*LIVE_STATES, STOPPING)).update(state=FAILED, error=why, address="")  # fmt: skip
        if ended:
            leases.release_server(server_id)
    return bool(ended)


def touch(server_id: int) -> None:
    ModelServer.objects.filter(pk=server_id).update(last_used=timezone.now())


def forget(server_id: int, address: str, why: str) -> None:
    """A ready process that did not answer (its worker died): the next request starts a new one."""
    ModelServer.objects.filter(pk=server_id, state=READY, address=address).update(state=FAILED, error=why)


def _state(server_id: int) -> ModelServer | None:
    return ModelServer.objects.filter(pk=server_id).first()


async def ready(ref: ModelRef, timeout: float | None = None, by: str = "") -> ModelServer:
    """The model's ready server, started if need be; NotServing when it fails or no worker starts it in time."""
    timeout = settings.SERVING_START_TIMEOUT_S if timeout is None else timeout
    server = await sync_to_async(request_start)(ref, by)
    deadline = time.monotonic() + timeout
    while True:
        if server.state == READY and server.address:
            await sync_to_async(touch)(server.pk)
            return server
        if server.state == FAILED:
            raise NotServing(f"the model server for {ref.name} failed to start: {server.error or 'no reason given'}")
        if server.state in (STOPPED, STOPPING):  # stopped between our start and now (idle): start again
            server = await sync_to_async(request_start)(ref, by)
        if time.monotonic() > deadline:
            if server.worker:  # a worker took it: the model is still loading
                raise NotServing(f"the model server for {ref.name} is still starting after {timeout:.0f} s; try again")
            queue = queues.task_queue(SERVE_MODEL_TASK)
            reason = await sync_to_async(queues.unanswered_reason)(queue, f"{timeout:.0f} s")
            raise NotServing(f"the model server for {ref.name} is not ready: {reason}")
        await asyncio.sleep(POLL_S)
        server = await sync_to_async(_state)(server.pk) or server
