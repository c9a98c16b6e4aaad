"""GPU workers: one run per GPU, the fleet inventory, and memory hygiene between runs.

Importing this module connects Celery signal handlers (the worker app imports it):

- `worker_process_init`: each prefork pool process is pinned to one GPU with
  CUDA_VISIBLE_DEVICES, by its pool index (process i gets the i-th visible GPU; a
  process that replaces one that exited keeps its index, hence its GPU). Start the
  worker with one process per GPU (`default_concurrency`, what the launcher does).
- `worker_ready` / `worker_shutdown`: the worker's row in `studio.fleet` (queues, GPUs,
  concurrency) is written, refreshed by a heartbeat thread (which also fails runs whose
  worker went silent), and marked stopped.
- `task_postrun`: GPU memory a finished or cancelled run left cached is returned.

Nothing here initialises CUDA in the parent process (GPUs are read with nvidia-smi).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
from typing import Any

from celery import signals

from studio.fleet.gpus import detect_gpus

log = logging.getLogger(__name__)


# --- one run per GPU ----------------------------------------------------------------------


def gpu_slots(env: dict[str, str] | None = None) -> list[str]:
    """The device ids pool processes are spread over: CUDA_VISIBLE_DEVICES as given (indices
    or UUIDs), else every GPU nvidia-smi lists; [] on a machine without GPUs."""
    env = os.environ if env is None else env
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        return [p.strip() for p in value.split(",") if p.strip()]
    return [str(g["index"]) for g in detect_gpus(env)]


def pin_to_gpu(process_index: int, slots: list[str], env: dict[str, str] | None = None) -> str | None:
    """Make pool process `process_index` see only its GPU; returns the device id, or None
    when there is no GPU (the process then runs on CPU)."""
    if not slots:
        return None
    env = os.environ if env is None else env
    device = slots[process_index % len(slots)]
    env["CUDA_VISIBLE_DEVICES"] = device
    return device


# Read once in the parent, before the pool forks, so children divide the same list.
_SLOTS: list[str] | None = None


@signals.worker_init.connect
def _remember_slots(**_: Any) -> None:
    global _SLOTS
    _SLOTS = gpu_slots()


@signals.worker_process_init.connect
def _pin_pool_process(**_: Any) -> None:
    from billiard.process import current_process

    if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        log.warning("CUDA was initialised before the pool forked; GPU pinning cannot apply")
        return
    index = getattr(current_process(), "index", 0) or 0
    device = pin_to_gpu(index, _SLOTS if _SLOTS is not None else gpu_slots())
    if device is not None:
        log.info("pool process %s runs on GPU %s", index, device)


# --- memory hygiene -------------------------------------------------------------------------


def release_gpu_memory() -> None:
    """Return what a finished run left behind: unreachable engines and models are collected,
    then the CUDA caching allocator gives its free blocks back to the driver. Call it after
    the run's own objects are out of scope (its engine already closed by the trainer)."""
    gc.collect()
    torch = sys.modules.get("torch")  # a process that never imported torch has nothing to free
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()  # so the next run's perf/gpu_mem_peak_gb is its own


@signals.task_postrun.connect
def _release_after_task(**_: Any) -> None:
    release_gpu_memory()


# --- fleet inventory ------------------------------------------------------------------------


def record_start(hostname: str, queues: list[str], concurrency: int) -> None:
    from studio.fleet.models import WorkerNode

    WorkerNode.record_start(hostname, queues, detect_gpus(), concurrency)


def beat(hostname: str, queues: list[str], concurrency: int) -> None:
    """One heartbeat: fresh last_seen and GPU readings (recreating a row someone deleted), then
    fail the runs whose worker has gone silent. Every live worker sweeps, so a dead one's runs
    end within a beat of the timeout without any page or API read having to write."""
    from studio.fleet.models import WorkerNode
    from studio.runs.lifecycle import sweep_lost_runs

    if not WorkerNode.record_beat(hostname, detect_gpus()):
        record_start(hostname, queues, concurrency)
    if failed := sweep_lost_runs():
        log.warning("runs %s failed: their worker stopped sending heartbeats", failed)


class Heartbeat(threading.Thread):
    """Calls `beat` every `interval` seconds until `stop()`; a failed beat (database away)
    is logged and retried at the next tick, it never kills the worker."""

    def __init__(self, hostname: str, queues: list[str], concurrency: int, interval: float) -> None:
        super().__init__(name="fleet-heartbeat", daemon=True)
        self.args = (hostname, queues, concurrency)
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        from django.db import close_old_connections

        while not self.stopped.wait(self.interval):
            try:
                beat(*self.args)
            except Exception as exc:  # noqa: BLE001 - keep beating; the next tick may succeed
                log.warning("fleet heartbeat failed: %s", exc)
            finally:
                close_old_connections()

    def stop(self) -> None:
        self.stopped.set()


_heartbeat: Heartbeat | None = None


def _consumer_facts(consumer: Any) -> tuple[str, list[str], int]:
    """(hostname, queue names, pool size) of the worker whose consumer sent `worker_ready`."""
    queues = sorted(consumer.app.amqp.queues.consume_from or consumer.app.amqp.queues)
    concurrency = getattr(getattr(consumer, "controller", None), "concurrency", 1) or 1
    return consumer.hostname, queues, int(concurrency)


@signals.worker_ready.connect
def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    from django.conf import settings

    global _heartbeat
    hostname, queues, concurrency = _consumer_facts(sender)
    try:
        record_start(hostname, queues, concurrency)
    except Exception as exc:  # noqa: BLE001 - the inventory is informative; runs must still run
        log.warning("could not record worker %s in the fleet: %s", hostname, exc)
    _heartbeat = Heartbeat(hostname, queues, concurrency, settings.HEARTBEAT_INTERVAL_S)
    _heartbeat.start()


@signals.worker_shutdown.connect
def _on_worker_shutdown(sender: Any = None, **_: Any) -> None:
    from studio.fleet.models import WorkerNode

    if _heartbeat is not None:
        _heartbeat.stop()
        hostname = _heartbeat.args[0]
        try:
            WorkerNode.record_stop(hostname)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not mark worker %s stopped: %s", hostname, exc)
