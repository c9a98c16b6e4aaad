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

A model server (studio.serving) leases its pool process's GPU the same way while it serves
(`take_for_server`, released when its task ends), so a run never takes a GPU a served model is on,
and a run waiting for that GPU says which model server holds it (studio.fleet.holders).

A machine without GPUs leases nothing: its runs' processes are CPU processes.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.db.models import Count, Q

from studio.fleet import holders
from studio.fleet.models import GpuLease, WorkerNode
from studio.runs.models import FINISHED_STATES
from studio.serving.models import LIVE_STATES, STOPPING


def _ended() -> Q:
    """Leases whose holder has ended (a worker that died before releasing them): they hold nothing."""
    return Q(run__state__in=FINISHED_STATES) | (
        Q(model_server__isnull=False) & ~Q(model_server__state__in=(*LIVE_STATES, STOPPING))
    )


def take(run_id: int, worker: str, devices: Sequence[str], count: int, prefer: Sequence[str] = ()) -> list[str] | None:
    """Lease `count` of `devices` (the worker's GPUs) to the run, all or none: the devices taken,
    or None when fewer are free. `prefer`: devices to take first (the pool process's own GPU)."""
    if count < 1:
        return []
    GpuLease.objects.filter(_ended(), worker=worker).delete()
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


def take_for_server(server_id: int, worker: str, device: str) -> bool:
    """Lease `device` of `worker` to a model server while it serves; False when a run (or another
    server) holds it."""
    GpuLease.objects.filter(_ended(), worker=worker, device=device).delete()
    try:
        with transaction.atomic():
            GpuLease.objects.create(worker=worker, device=device, model_server_id=server_id)
    except IntegrityError:
        return False
    return True


def release_server(server_id: int) -> int:
    deleted, _ = GpuLease.objects.filter(model_server_id=server_id).delete()
    return deleted


def held_by_servers(worker: str) -> list[str]:
    """The GPUs of `worker` that model servers hold."""
    return list(GpuLease.objects.filter(worker=worker, model_server__isnull=False).exclude(_ended())
                .values_list("device", flat=True))  # fmt: skip


def held_by(run_id: int) -> list[str]:
    return list(GpuLease.objects.filter(run_id=run_id).values_list("device", flat=True))


def free_gpus(worker: str, devices: Sequence[str]) -> list[str]:
    held = set(GpuLease.objects.filter(worker=worker).exclude(_ended()).values_list("device", flat=True))
    return [d for d in devices if d not in held]


def waiting_reason(count: int, worker: str, devices: Sequence[str], own: str | None = None,
                   team_id: int | None = None) -> str:  # fmt: skip
    """What a run that could not lease its GPUs on `worker` waits for, with the free GPUs of every
    online worker that has GPUs: "waiting for 2 free GPUs on one worker (1 free on gpu@a, 0 free on gpu@b)",
    and the model servers that hold GPUs (named when of the run's team `team_id`)."""
    if count == 1 and own is not None:
        lease = GpuLease.objects.filter(worker=worker, device=own).exclude(_ended()).first()
        return f"waiting for GPU {own} of {worker}, which {holders.lease_holder(lease, team_id)} holds"
    inventory = {node.hostname: node.devices for node in WorkerNode.objects.online() if node.gpus}
    inventory[worker] = list(devices)  # this worker's own word, even before its fleet row is written
    held = dict(
        GpuLease.objects.filter(worker__in=inventory).exclude(_ended()).values_list("worker").annotate(n=Count("id"))
    )
    free = {host: len(gpus) - held.get(host, 0) for host, gpus in sorted(inventory.items())}
    text = f"waiting for {count} free GPU{'s' if count > 1 else ''} on one worker"
    text += f" ({', '.join(f'{n} free on {host}' for host, n in free.items())})"
    largest = max(inventory.items(), key=lambda item: len(item[1]))
    if len(largest[1]) < count:
        text += f"; no worker has {count} GPUs (the most: {len(largest[1])} on {largest[0]})"
    served = holders.leasing_servers(list(inventory))
    if served:
        words = ", ".join(holders.server_words(s, team_id) for s in served)
        text += f"; {words} {'holds a GPU' if len(served) == 1 else 'hold GPUs'}"
    return text
