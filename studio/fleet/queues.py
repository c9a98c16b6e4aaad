"""Which queue a task goes to, which workers serve it, and why a task sent there got no answer: shared
by the "try it" panels (rubrics, environments), which wait on a worker with a time limit, and by a
queued run's page (studio.runs.queueing)."""

from __future__ import annotations

from django.conf import settings

from studio.fleet.models import WorkerNode


def task_queue(task_name: str) -> str:
    """The queue `task_name` is routed to (settings.CELERY_TASK_ROUTES, else the default queue)."""
    route = settings.CELERY_TASK_ROUTES.get(task_name, {})
    return route.get("queue", settings.CELERY_TASK_DEFAULT_QUEUE)


def unanswered_reason(queue: str, waited: str) -> str:
    """Why a task on `queue` was not taken within `waited`: no worker serves that queue, or all were busy."""
    busy = [node.hostname for node in serving(queue)]
    if not busy:
        return f"no worker answered within {waited}: {no_worker(queue)}"
    return (
        f"no worker took the request within {waited}: the workers on the {queue!r} queue ({', '.join(busy)}) were busy"
    )


def serving(queue: str) -> list[WorkerNode]:
    """The online workers that consume `queue`."""
    return [node for node in WorkerNode.objects.online() if queue in node.queues]


def no_worker(queue: str) -> str:
    """That no worker serves `queue`, and how to start one."""
    return (f"none serving the {queue!r} queue is running "
            f"(./studioctl up starts one; on another machine: ./studioctl worker --queues {queue})")  # fmt: skip
