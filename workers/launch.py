"""A run's start on this worker: its GPUs leased and its state set to running in one transaction
(`claim`), then its processes started by the launcher studio.runs.placement chose (`run_processes`).

- in-process (one process): the task trains in its own pool process (workers.tasks), on that
  process's GPU, which it leases like any other so a multi-GPU run never takes it meanwhile.
- torchrun (several processes, one machine): workers.torchrun, on GPUs of this worker it leased, all
  of them free together, or CPU processes on gloo on a machine without GPUs.
- ray (several machines): handed to `workers.ray_launch.run_group(spec, reporter, should_stop)`, which
  places the processes on the Ray cluster (settings.RAY_ADDRESS) and returns an object with `status`
  and `detail` like workers.torchrun.GroupResult; its ranks report through a Ray actor that the task
  drains (trainers.scale.ray_cluster): only Ray's own connections cross the machines.

A run whose GPUs are not all free raises GpusBusy after saying on the run what it waits for; the
Celery task then goes back to the queue (workers.tasks), so no pool process sits waiting for GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from studio.fleet import leases
from studio.runs import lifecycle, placement
from studio.runs.models import QUEUED, Run
from trainers.report import Reporter
from workers import gpu


class GpusBusy(Exception):
    """The run's GPUs are not all free yet; the run says what it waits for."""


def claim(run: Run, worker: str) -> list[str] | None:
    """Lease the run's GPUs on this worker and mark it running, together: the GPUs it got ([] on a
    machine without GPUs, and for a Ray run), or None when it is no longer queued (cancelled, or
    another worker started it). Raises GpusBusy when its GPUs are not all free."""
    pool = gpu.pool_gpus()
    count = placement.local_gpus(run.spec, run.kind) if pool.devices else 0
    one = count == 1 and pool.own is not None  # a one-process run trains here, on this process's GPU
    with transaction.atomic():
        taken = leases.take(run.pk, worker, [pool.own] if one else pool.devices, count,
                            prefer=[pool.own] if pool.own else [])  # fmt: skip
        if taken is not None:
            if lifecycle.start(run.pk, worker, placement.describe(run.spec, run.kind, taken)):
                return taken
            transaction.set_rollback(True)  # not queued any more: it keeps no lease
            return None
    if not Run.objects.filter(pk=run.pk, state=QUEUED).exists():
        return None
    reason = leases.waiting_reason(count, worker, pool.devices, pool.own if one else None, team_id=run.team_id)
    lifecycle.note_waiting(run.pk, reason)
    raise GpusBusy(f"run {run.pk} waits for {count} GPU(s) on {worker}")


def run_processes(run: Run, spec: Any, reporter: Reporter, should_stop: Callable[[], bool],
                  devices: list[str]) -> Any:  # fmt: skip
    """Run a multi-process run (launcher torchrun or ray) to its end; the result has `status` and `detail`."""
    how = placement.launcher(run.spec, run.kind)
    if how == placement.TORCHRUN:
        from workers.torchrun import run_group  # psutil and the relay: only workers that run such runs

        return run_group(spec, reporter, should_stop, placement.processes(run.spec)[0], devices)
    if how == placement.RAY:
        if refused := placement.refusal(run.spec, run.kind):
            raise RuntimeError(refused)  # settings changed since launch
        from workers.ray_launch import run_group as run_on_ray  # ray itself loads only when a run needs it

        return run_on_ray(spec, reporter, should_stop)
    raise ValueError(f"run {run.pk} runs in its task's own process, not as a group ({how})")
