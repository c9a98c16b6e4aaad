"""GPU workers: one run per GPU, the fleet inventory, and memory hygiene between runs.

Importing this module connects Celery signal handlers (the worker app imports it):

- `worker_process_init`: each prefork pool process is pinned to one GPU with
  CUDA_VISIBLE_DEVICES, by its pool index (process i gets the i-th visible GPU; a
  process that replaces one that exited keeps its index, hence its GPU). Start the
  worker with one process per GPU (`default_concurrency`, what the launcher does).
  A run leases the GPUs it uses (`pool_gpus` says which it may; studio.fleet.leases):
  its pool process's own for a one-process run, any free ones of the worker for several.
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
import time
from dataclasses import dataclass, field
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
_HAS_GPUS: bool | None = None  # whether nvidia-smi saw GPUs (slots named by CUDA_VISIBLE_DEVICES alone are not)
_OWN: str | None = None  # in a pool process: the GPU it is pinned to


@signals.worker_init.connect
def _remember_slots(**_: Any) -> None:
    global _SLOTS, _HAS_GPUS
    _SLOTS = gpu_slots()
    _HAS_GPUS = bool(detect_gpus())


@signals.worker_process_init.connect
def _pin_pool_process(**_: Any) -> None:
    from billiard.process import current_process

    if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        log.warning("CUDA was initialised before the pool forked; GPU pinning cannot apply")
        return
    global _OWN
    index = getattr(current_process(), "index", 0) or 0
    device = pin_to_gpu(index, _SLOTS if _SLOTS is not None else gpu_slots())
    if device is not None:
        _OWN = device
        log.info("pool process %s runs on GPU %s", index, device)


@dataclass(frozen=True)
class PoolGpus:
    """The GPUs this process's runs may lease: every GPU of its worker, and the one it is pinned to
    (what a one-process run, which trains in this process, uses). Empty on a machine without GPUs."""

    devices: list[str] = field(default_factory=list)
    own: str | None = None


def pool_gpus() -> PoolGpus:
    has_gpus = _HAS_GPUS if _HAS_GPUS is not None else bool(detect_gpus())
    if not has_gpus:
        return PoolGpus()
    slots = list(_SLOTS if _SLOTS is not None else gpu_slots())
    # Outside a pinned pool process (a direct call) the trainer takes the first GPU it sees.
    return PoolGpus(slots, _OWN if _OWN is not None else (slots[0] if slots else None))


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


def beat(hostname: str, queues: list[str], concurrency: int, sweep: bool = True) -> None:
    """One heartbeat: fresh last_seen and GPU readings (recreating a row someone deleted), then
    end the runs and model servers whose worker has gone silent (studio.runs.lifecycle.sweep_lost_runs,
    studio.serving.servers.sweep_lost_servers). Every live worker sweeps, so a dead one's runs
    end within a beat of the timeout without any page or API read having to write."""
    from studio.fleet.models import WorkerNode
    from studio.runs.lifecycle import sweep_lost_runs
    from studio.serving.servers import sweep_lost_servers
    from studio.sweeps.driver import drive_all

    if not WorkerNode.record_beat(hostname, detect_gpus()):
        record_start(hostname, queues, concurrency)
    if sweep and (lost := sweep_lost_runs()):
        log.warning("runs %s lost: their worker stopped sending heartbeats (each restarted while it may be)", lost)
    if sweep:  # sweeps whose last event found their driver busy, or died with it, go on within a beat
        drive_all()
    if sweep and (gone := sweep_lost_servers()):
        log.warning("model servers %s ended: their worker stopped sending heartbeats", gone)


class Heartbeat(threading.Thread):
    """Calls `beat` every `interval` seconds until `stop()`; a failed beat (database away) is
    logged once per outage and retried at the next tick on a new connection (a broken one is
    closed), it never kills the worker. After a failed beat it does not sweep for `sweep_grace_s`
    (default HEARTBEAT_TIMEOUT_S): the runs' own heartbeats could not be written either, and
    they need that long to be seen again; a run is not lost because its database was away."""

    def __init__(self, hostname: str, queues: list[str], concurrency: int, interval: float,
                 sweep_grace_s: float | None = None) -> None:  # fmt: skip
        super().__init__(name="fleet-heartbeat", daemon=True)
        self.args = (hostname, queues, concurrency)
        self.interval = interval
        self.sweep_grace_s = sweep_grace_s
        self.stopped = threading.Event()

    def run(self) -> None:
        from django.conf import settings
        from django.db import close_old_connections

        grace = settings.HEARTBEAT_TIMEOUT_S if self.sweep_grace_s is None else self.sweep_grace_s
        failing_since: float | None = None
        sweep_from = 0.0  # monotonic
        while not self.stopped.wait(self.interval):
            try:
                beat(*self.args, sweep=time.monotonic() >= sweep_from)
            except Exception as exc:  # noqa: BLE001 - keep beating; the next tick may succeed
                sweep_from = time.monotonic() + grace
                if failing_since is None:
                    failing_since = time.monotonic()
                    log.warning("fleet heartbeat failed (%s: %s); beating on", type(exc).__name__, exc)
            else:
                if failing_since is not None:
                    log.warning("fleet heartbeat written again after %.0f s; lost runs are swept again in %.0f s",
                                time.monotonic() - failing_since, max(0.0, sweep_from - time.monotonic()))  # fmt: skip
                    failing_since = None
            finally:
                close_old_connections()  # a connection the failure broke is closed: the next beat opens a new one

    def stop(self, timeout: float = 10.0) -> None:
        """Stop beating and wait for a beat under way: a beat finishing after the worker
        recorded its stop would mark it running again."""
        self.stopped.set()
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout)


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
