"""The web side of a model server: find the ready process for a model, or ask a worker to start one
and wait for it (started on first use); stamp its use so the worker keeps it warm.

The web process never loads a model: it enqueues `workers.serve_model` by name on the queue the fleet
accounts for (settings.CELERY_TASK_ROUTES) and reads the row the worker writes.
"""

from __future__ import annotations

import asyncio
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from studio.celery import SERVE_MODEL_TASK, app
from studio.fleet import queues
from studio.serving.models import FAILED, READY, STARTING, STOPPED, STOPPING, ModelServer
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
        if server.state in (STARTING, READY):
            return server
        server.state, server.generation, server.error = STARTING, server.generation + 1, ""
        server.model_path, server.checkpoint, server.model_spec = ref.model_path, ref.checkpoint, ref.model_spec
        server.address = server.worker = server.engine = ""
        server.started, server.last_used, server.started_by = None, timezone.now(), by[:200]
        server.save()
        generation = server.generation
        transaction.on_commit(lambda: app.send_task(SERVE_MODEL_TASK, args=[server.pk, generation]))
    return server


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
