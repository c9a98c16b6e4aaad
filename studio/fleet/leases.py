"""Which run holds which GPU: the database is the one record (a GpuLease row per GPU per run).

A run that needs N GPUs of a machine gets N free GPUs of one worker together or none (`take`): the
rows are inserted in one transaction, and the (worker, device) unique constraint refuses a GPU
another run took between our read and our write, so no GPU ever serves two runs and no lock is held
while a run waits. Single-GPU runs lease their pool process's GPU the same way, so a multi-GPU run
never takes a GPU in use.

Leases end with the run: `studio.runs.lifecycle.finish` releases them in the transaction that ends
the run, which covers the worker finishing it, a cancel, and the sweeper failing the runs of a worker
that went silent (a lost worker's GPUs come back when its runs are failed). `take` also drops leases
whose run has ended, in case a worker died between the two.

A machine without GPUs leases nothing: its runs' processes are CPU processes.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.db.models import Count

from studio.fleet.models import GpuLease, WorkerNode
from studio.runs.models import FINISHED_STATES


def take(run_id: int, worker: str, devices: Sequence[str], count: int, prefer: Sequence[str] = ()) -> list[str] | None:
    """Lease `count` of `devices` (the worker's GPUs) to the run, all or none: the devices taken,
    or None when fewer are free. `prefer`: devices to take first (the pool process's own GPU)."""
    if count < 1:
        return []
    GpuLease.objects.filter(worker=worker, run__state__in=FINISHED_STATES).delete()
    held = _held(worker)
    free = [d for d in devices if d not in held]
    if len(free) < count:
        return None
    order = list(devices).index
    chosen = sorted(sorted(free, key=lambda d: (d not in prefer, order(d)))[:count], key=order)
    try:
        with transaction.atomic():  # a savepoint inside the caller's transaction: its work stays
            GpuLease.objects.bulk_create(GpuLease(worker=worker, device=d, run_id=run_id) for d in chosen)
    except IntegrityError:  # another run took one of them after our read: this run waits its turn
        return None
    return chosen


def _held(worker: str) -> set[str]:
    return set(GpuLease.objects.filter(worker=worker).values_list("device", flat=True))


def release(run_id: int) -> int:
    """End the run's leases; returns how many there were."""
    deleted, _ = GpuLease.objects.filter(run_id=run_id).delete()
    return deleted


def held_by(run_id: int) -> list[str]:
    return list(GpuLease.objects.filter(run_id=run_id).values_list("device", flat=True))


def free_gpus(worker: str, devices: Sequence[str]) -> list[str]:
    held = set(GpuLease.objects.filter(worker=worker).exclude(run__state__in=FINISHED_STATES)
               .values_list("device", flat=True))  # fmt: skip
    return [d for d in devices if d not in held]


def waiting_reason(count: int, worker: str, devices: Sequence[str], own: str | None = None) -> str:
    """What a run that could not lease its GPUs on `worker` waits for, with the free GPUs of every
    online worker that has GPUs: "waiting for 2 free GPUs on one worker (1 free on gpu@a, 0 free on gpu@b)"."""
    if count == 1 and own is not None:
        return f"waiting for GPU {own} of {worker}, which another run holds"
    inventory = {node.hostname: node.devices for node in WorkerNode.objects.online() if node.gpus}
    inventory[worker] = list(devices)  # this worker's own word, even before its fleet row is written
    held = dict(
        GpuLease.objects.filter(worker__in=inventory)
        .exclude(run__state__in=FINISHED_STATES)
        .values_list("worker")
        .annotate(n=Count("id"))
    )
    free = {host: len(gpus) - held.get(host, 0) for host, gpus in sorted(inventory.items())}
    text = f"waiting for {count} free GPU{'s' if count > 1 else ''} on one worker"
    text += f" ({', '.join(f'{n} free on {host}' for host, n in free.items())})"
    largest = max(inventory.items(), key=lambda item: len(item[1]))
    if len(largest[1]) < count:
        text += f"; no worker has {count} GPUs (the most: {len(largest[1])} on {largest[0]})"
    return text
