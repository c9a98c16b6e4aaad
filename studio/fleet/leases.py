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

Shared GPUs: a worker started with STUDIO_GPU_SHARE=N (settings.GPU_SHARE) cuts each GPU into N shares and
runs N pool processes per GPU. A one-process run there leases one share of its pool process's GPU (`take`
with `part`) and is told its part of the memory (workers.gpu_share); a run of several processes, and a model
server, lease every share of each GPU they use, so a whole GPU is never split under them. Each share is a
row, and the (worker, device, slot) unique constraint keeps one share from serving two holders as it kept
one GPU from serving two runs. A team's GPUs (`team_gpus`, for TeamQuota.max_gpus) sum its shares' parts.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
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


def take(run_id: int, worker: str, devices: Sequence[str], count: int, prefer: Sequence[str] = (),
         part: bool = False, shares: int | None = None) -> list[str] | None:  # fmt: skip
    """Lease `count` of `devices` (the worker's GPUs) to the run, all or none: the devices taken,
    or None when fewer are free. `prefer`: devices to take first (the pool process's own GPU).

    `shares`: how many shares this worker splits each GPU into (settings.GPU_SHARE, read in the worker's
    own process). A whole GPU is leased as all its shares, so nobody takes a part of it meanwhile; with
    `part` (a one-process run on a worker that shares its GPUs) the run takes one free share of one GPU."""
    if count < 1:
        return []
    shares = settings.GPU_SHARE if shares is None else shares
    GpuLease.objects.filter(_ended(), worker=worker).delete()
    held = _held(worker)
    order = list(devices).index
    ranked = sorted(devices, key=lambda d: (d not in prefer, order(d)))
    if part and shares > 1 and count == 1:
        return _take_share(run_id, worker, ranked, held, shares)
    free = [d for d in ranked if d not in held]
    if len(free) < count:
        return None
    chosen = sorted(free[:count], key=order)
    return _insert(run_id, worker, [(d, slot) for d in chosen for slot in range(shares)], shares, chosen)


def _take_share(run_id: int, worker: str, ranked: Sequence[str], held: dict[str, dict[int, int]],
                shares: int) -> list[str] | None:  # fmt: skip
    """One free share of the first of `ranked` that has one. A GPU whose leases were cut into another number
    of shares (the worker restarted with another STUDIO_GPU_SHARE) is shared again once they have ended."""
    for device in ranked:
        slots = held.get(device, {})
        if any(cut != shares for cut in slots.values()):
            continue
        free = [slot for slot in range(shares) if slot not in slots]
        if free:
            return _insert(run_id, worker, [(device, free[0])], shares, [device])
    return None


def _insert(run_id: int, worker: str, rows: list[tuple[str, int]], shares: int, chosen: list[str]) -> list[str] | None:
    try:
        with transaction.atomic():  # a savepoint inside the caller's transaction: its work stays
            GpuLease.objects.bulk_create(GpuLease(worker=worker, device=d, slot=slot, shares=shares, run_id=run_id)
                                         for d, slot in rows)  # fmt: skip
    except IntegrityError:  # another run took one of them after our read: this run waits its turn
        return None
    return chosen


def _held(worker: str) -> dict[str, dict[int, int]]:
    """{device: {slot: shares it was cut into}} of the leases on `worker`."""
    held: dict[str, dict[int, int]] = {}
    for device, slot, shares in GpuLease.objects.filter(worker=worker).values_list("device", "slot", "shares"):
        held.setdefault(device, {})[slot] = shares
    return held


def shares_in_use(worker: str) -> dict[str, tuple[int, int]]:
    """{device: (shares held, shares it is cut into)} for the GPUs of `worker` someone holds (the fleet page)."""
    live = GpuLease.objects.filter(worker=worker).exclude(_ended()).values_list("device", "shares")
    used: dict[str, tuple[int, int]] = {}
    for device, shares in live:
        n, _ = used.get(device, (0, shares))
        used[device] = (n + 1, shares)
    return used


def team_gpus(team_id: int) -> float:
    """The GPUs the team's running runs hold, a share counted as its part (1 / shares): what TeamQuota.max_gpus
    limits. A model server's lease counts for no team (the playground's load is not a run's)."""
    live = GpuLease.objects.filter(run__team_id=team_id).exclude(_ended()).values_list("shares", flat=True)
    return sum(1.0 / max(1, shares) for shares in live)


def release(run_id: int) -> int:
    """End the run's leases; returns how many there were."""
    deleted, _ = GpuLease.objects.filter(run_id=run_id).delete()
    return deleted


def take_for_server(server_id: int, worker: str, device: str, shares: int | None = None) -> bool:
    """Lease `device` of `worker` (all its shares: a model server has the whole GPU) to a model server while
    it serves; False when a run (or another server) holds it or a share of it."""
    shares = settings.GPU_SHARE if shares is None else shares
    GpuLease.objects.filter(_ended(), worker=worker, device=device).delete()
    try:
        with transaction.atomic():
            GpuLease.objects.bulk_create(GpuLease(worker=worker, device=device, slot=slot, shares=shares,
                                                  model_server_id=server_id) for slot in range(shares))  # fmt: skip
    except IntegrityError:
        return False
    return True


def release_server(server_id: int) -> int:
    deleted, _ = GpuLease.objects.filter(model_server_id=server_id).delete()
    return deleted


def held_by_servers(worker: str) -> list[str]:
    """The GPUs of `worker` that model servers hold."""
    return sorted(set(GpuLease.objects.filter(worker=worker, model_server__isnull=False).exclude(_ended())
                      .values_list("device", flat=True)))  # fmt: skip


def held_by(run_id: int) -> list[str]:
    """The GPUs the run holds (each once, however many of its shares)."""
    return list(dict.fromkeys(GpuLease.objects.filter(run_id=run_id).order_by("device", "slot")
                              .values_list("device", flat=True)))  # fmt: skip


def part_of(run_id: int) -> float | None:
    """The part of a GPU the run holds when it holds one share of a shared GPU (1/4 on a worker with
    STUDIO_GPU_SHARE=4); None when it holds whole GPUs or none."""
    shares = list(GpuLease.objects.filter(run_id=run_id).values_list("shares", flat=True)[:2])
    return 1.0 / shares[0] if len(shares) == 1 and shares[0] > 1 else None


def free_gpus(worker: str, devices: Sequence[str]) -> list[str]:
    """The GPUs of `worker` nobody holds any share of."""
    held = set(GpuLease.objects.filter(worker=worker).exclude(_ended()).values_list("device", flat=True))
    return [d for d in devices if d not in held]


def waiting_reason(count: int, worker: str, devices: Sequence[str], own: str | None = None,
                   team_id: int | None = None, part: bool = False) -> str:  # fmt: skip
    """What a run that could not lease its GPUs on `worker` waits for, with the free GPUs of every
    online worker that has GPUs: "waiting for 2 free GPUs on one worker (1 free on gpu@a, 0 free on gpu@b)",
    and the model servers that hold GPUs (named when of the run's team `team_id`). `part`: it wanted a share
    of its pool process's GPU `own` (a worker that shares its GPUs)."""
    if count == 1 and own is not None:
        live = GpuLease.objects.filter(worker=worker, device=own).exclude(_ended())
        lease = live.filter(model_server__isnull=False).first() or live.first()  # a server holds the whole GPU
        if part and lease is not None and lease.run_id and lease.shares > 1:
            return (f"waiting for a share of GPU {own} of {worker}: other runs hold {live.count()} of its "
                    f"{lease.shares} shares")  # fmt: skip
        return f"waiting for GPU {own} of {worker}, which {holders.lease_holder(lease, team_id)} holds"
    inventory = {node.hostname: node.devices for node in WorkerNode.objects.online() if node.gpus}
    inventory[worker] = list(devices)  # this worker's own word, even before its fleet row is written
    held = dict(
        GpuLease.objects.filter(worker__in=inventory)
        .exclude(_ended())
        .values_list("worker")
        .annotate(n=Count("device", distinct=True))
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
