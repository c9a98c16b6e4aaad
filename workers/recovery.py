"""What a worker's main process does for the runs it executes when it stops or loses a process.

Importing this module connects two Celery signal handlers (the worker app imports it):

- `worker_shutting_down` (SIGTERM or SIGINT to the worker's main process: a deploy, preemption,
  Kubernetes stopping the pod, the studio's Ctrl-C): the runs this worker executes are asked to save
  a checkpoint at their next step boundary and stop (`interrupt_requested`, read by each run's
  workers.reporting.CancelCheck); they end interrupted and are resumed by themselves
  (studio.runs.lifecycle). Celery's warm shutdown then waits for them. A signal sent to the whole
  process group also reaches the pool process, which does the same by itself
  (workers.tasks.interrupted_by_signals).
- `task_failure` with WorkerLostError (the pool process executing a run died: an out-of-memory kill,
  a crashed driver): the run is ended as lost at once, and restarted from its newest checkpoint,
  instead of waiting for its heartbeat to go stale (HEARTBEAT_TIMEOUT_S). A model server's task
  dying so ends its server (failed, its GPU freed: studio.serving.servers.end_lost_server).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from billiard.exceptions import WorkerLostError
from celery import signals

from studio.celery import EVAL_TASK, SERVE_MODEL_TASK, TRAIN_TASK

log = logging.getLogger(__name__)


@signals.worker_shutting_down.connect
def _on_shutting_down(sender: Any = None, **_: Any) -> None:
    # A signal handler of the main thread: the database is written from a thread of its own, so a
    # query this thread was in the middle of never shares its connection.
    threading.Thread(target=_interrupt_runs, args=(str(sender),), name="interrupt-runs", daemon=True).start()


def _interrupt_runs(hostname: str) -> None:
    from django.db import connection

    from studio.runs.lifecycle import request_interrupt

    try:
        if ids := request_interrupt(hostname):
            log.warning("shutting down: runs %s save a checkpoint at the end of their step, then stop", ids)
    except Exception as exc:  # noqa: BLE001 - the pool processes still get the signal sent to the group
        log.warning("could not ask the runs of %s to stop: %s", hostname, exc)
    finally:
        connection.close()


@signals.task_failure.connect
def _on_task_failure(sender: Any = None, exception: BaseException | None = None, args: Any = None,
                     **_: Any) -> None:  # fmt: skip
    name = getattr(sender, "name", None)
    if not isinstance(exception, WorkerLostError) or name not in (TRAIN_TASK, EVAL_TASK, SERVE_MODEL_TASK):
        return
    hostname = getattr(getattr(sender, "request", None), "hostname", None)
    if name == SERVE_MODEL_TASK:
        if args and len(args) == 2 and all(isinstance(a, int) for a in args):
            end_lost_server(*args, f"its process died on {hostname or 'its worker'} ({exception})")
        return
    run_id = args[0] if args else None
    if isinstance(run_id, int):
        end_lost_run(run_id, hostname, f"its process died on {hostname or 'its worker'} ({exception})")


def end_lost_server(server_id: int, generation: int, reason: str) -> bool:
    from studio.serving.servers import end_lost_server as end

    try:
        return end(server_id, generation, reason)
    except Exception as exc:  # noqa: BLE001 - the heartbeat sweeper cannot end it (its worker lives): say so
        log.warning("could not end lost model server %s: %s", server_id, exc)
        return False


def end_lost_run(run_id: int, hostname: str | None, reason: str) -> bool:
    """End the run as lost if this worker still runs it (not a newer attempt elsewhere)."""
    from studio.runs.lifecycle import end_lost
    from studio.runs.models import RUNNING, Run

    try:
        running = Run.objects.filter(pk=run_id, state=RUNNING)
        if hostname:
            running = running.filter(worker=hostname)
        attempt = running.values_list("restarts", flat=True).first()
        return attempt is not None and end_lost(run_id, reason, attempt=attempt)
    except Exception as exc:  # noqa: BLE001 - the heartbeat sweeper ends it later
        log.warning("could not end lost run %s: %s", run_id, exc)
        return False
