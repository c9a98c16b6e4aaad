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

A run whose GPUs are not all free, or whose team is at a limit the operator set (studio.fleet.quotas),
raises GpusBusy after saying on the run what it waits for; the Celery task then goes back to the queue
(workers.tasks), so no pool process sits waiting for GPUs. A task's pool process starts the fairest queued run
that can start, which need not be the one its message named (`claim_fairly`, studio.fleet.fairness).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from studio.fleet import fairness, leases, quotas
from studio.fleet.models import TeamQuota
from studio.fleet.queues import task_queue
from studio.runs import lifecycle, placement
from studio.runs.models import QUEUED, Run
from trainers.report import Reporter
from workers import gpu


class GpusBusy(Exception):
    """The run's GPUs are not all free yet, or its team is at a limit; the run says what it waits for."""


@dataclass(frozen=True)
class Need:
    """What a run asks of this pool process: `count` GPUs, or with `part` one share of its own GPU."""

    count: int
    own: str | None
    part: bool

    @property
    def gpus(self) -> float:
        """What the team's GPU limit counts it as (studio.fleet.quotas)."""
        return 1.0 / settings.GPU_SHARE if self.part else float(self.count)


@dataclass(frozen=True)
class Waits:
    """Why a run may not start here now: its team's limits (`limits`), or GPUs not free."""

    words: str
    limits: bool


def need_of(run: Run, pool: gpu.PoolGpus) -> Need:
    count = placement.local_gpus(run.spec, run.kind) if pool.devices else 0
    one = count == 1 and pool.own is not None  # a one-process run trains here, on this process's GPU
    return Need(count, pool.own if one else None, one and settings.GPU_SHARE > 1)


def claim(run: Run, worker: str) -> list[str] | None:
    """Lease the run's GPUs on this worker and mark it running, together: the GPUs it got ([] on a
    machine without GPUs, and for a Ray run), or None when it is no longer queued (cancelled, or
    another worker started it). Raises GpusBusy when its GPUs are not all free or its team is at a limit."""
    pool = gpu.pool_gpus()
    outcome = _attempt(run, worker, pool, need_of(run, pool))
    if isinstance(outcome, Waits):
        lifecycle.note_waiting(run.pk, outcome.words)
        raise GpusBusy(f"run {run.pk} waits on {worker}: {outcome.words}")
    return outcome


def claim_fairly(run: Run, worker: str) -> tuple[Run, list[str]] | None:
    """Start the fairest queued run that can start in this pool process (studio.fleet.fairness): `run`, whose
    message this task took, or another in its place. (the run started, its GPUs); None when `run` is no longer
    queued and no other could start. Raises GpusBusy when `run` must wait and none could start instead.
    When another starts, `run`, if it waits, is sent again, so it keeps a message of its own.

    Each run's try is `claim`'s transaction; a team refused by its limits, or a GPU need that found no free
    GPU, is not tried again for the team's (or the same need's) other runs in the same pass."""
    pool = gpu.pool_gpus()
    refused: dict[tuple[int, float], Waits] = {}  # (team, GPUs) its limits refused this pass
    # Needs that found no free GPU here this pass, per team: the words name a model server to its own team only.
    no_gpus: dict[tuple[Need, int], Waits] = {}
    own: Waits | None = None
    for candidate in fairness.fair_order(task_queue(lifecycle.task_for(run)), include=run):
        need = need_of(candidate, pool)
        known = refused.get((candidate.team_id, need.gpus)) or no_gpus.get((need, candidate.team_id))
        outcome = known if known is not None else _attempt(candidate, worker, pool, need)
        if isinstance(outcome, list):
            if candidate.pk != run.pk and Run.objects.filter(pk=run.pk, state=QUEUED).exists():
                if own is None:  # not tried: a fairer run came first
                    _note_limits(run, need_of(run, pool))
                lifecycle.enqueue(run)  # its message started another run: it gets a new one
            return candidate, outcome
        if isinstance(outcome, Waits):
            if outcome.limits:
                refused[(candidate.team_id, need.gpus)] = outcome
            else:
                no_gpus[(need, candidate.team_id)] = outcome
            lifecycle.note_waiting(candidate.pk, outcome.words)
            if candidate.pk == run.pk:
                own = outcome
    if own is None:
        return None  # not queued any more: its message has nothing left to do
    raise GpusBusy(f"run {run.pk} waits on {worker}: {own.words}")


def _note_limits(run: Run, need: Need) -> None:
    """Say on `run`, which was not tried because a fairer run started in its place, whether its team's limits
    hold it anyway (read without the lock: it only words what the run's own next try decides)."""
    quota = TeamQuota.objects.select_related("team").filter(team_id=run.team_id).first()
    if reason := quotas.refusal(quota, need.gpus if need.count else 0.0):
        lifecycle.note_waiting(run.pk, quotas.WAITING + reason)


def _attempt(run: Run, worker: str, pool: gpu.PoolGpus, need: Need) -> list[str] | Waits | None:
    """One try: the GPUs it got when the run started, why it waits, or None when it is not queued.
    The team's limits are read with its row locked (studio.fleet.quotas.lock) in the transaction that leases
    the GPUs and starts the run, so two pool processes cannot both take the team's last place."""
    with transaction.atomic():
        quota = quotas.lock(run.team_id)
        reason = quotas.refusal(quota, need.gpus if need.count else 0.0)
        if not reason:
            devices = [need.own] if need.own is not None else pool.devices
            taken = leases.take(run.pk, worker, devices, need.count, prefer=[pool.own] if pool.own else [],
                                part=need.part)  # fmt: skip
            if taken is not None:
                if lifecycle.start(run.pk, worker, placement.describe(run.spec, run.kind, taken)):
                    return taken
                transaction.set_rollback(True)  # not queued any more: it keeps no lease
                return None
    if not Run.objects.filter(pk=run.pk, state=QUEUED).exists():
        return None
    if reason:
        return Waits(quotas.WAITING + reason, limits=True)
    words = leases.waiting_reason(need.count, worker, pool.devices, need.own, team_id=run.team_id, part=need.part)
    return Waits(words, limits=False)


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
