"""What runs used: device-seconds (GPU or CPU) per process, tokens generated and trained, and their cost.

A run's worker records each attempt's usage as the run goes (`record`, with every batch of reports) and
once more, final, when the attempt ends: the wall time of each of its processes on its device (the
run's placement: one process in the pool process, or torchrun's / Ray's processes), and the tokens its
step metrics counted (`tokens/generated`, `tokens/trained`, trainers.run.step_metrics). A restart is a
new attempt with a key of its own in `Run.usage`, so an attempt written twice is counted once and the
steps a restart does again are counted as the devices really ran them. The Run fields
(`device_seconds`, `gpu_seconds`, `tokens_generated`, `tokens_trained`) are the sums over attempts, so
usage pages and quotas sum plain columns.

Cost is priced when shown, from settings.GPU_HOUR_PRICE and CPU_HOUR_PRICE (0: not priced), so a
price the operator changes applies to every run alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from studio.accounts.models import Team
from studio.runs import placement
from studio.runs.models import RUNNING, Run

CPU = "cpu"
# A Ray run's processes, placed by its cluster: on GPUs where the cluster has them (trainers.scale.ray_cluster),
# as the worker learns from the first step's metrics (workers.reporting.UsageMeter); CPU processes until then.
RAY_DEVICE, RAY_GPU = "cpu (Ray)", "gpu (Ray)"
TOTAL_FIELDS = ("device_seconds", "gpu_seconds", "tokens_generated", "tokens_trained")


def processes(spec: dict[str, Any], kind: str, devices: list[str], part: float | None = None) -> list[dict[str, Any]]:
    """The run's processes and the device each holds, as its placement starts them: [{rank, device}], with
    `share` where the process holds `part` of a shared GPU (studio.fleet.leases.part_of: 1/4 on a worker with
    STUDIO_GPU_SHARE=4), which its seconds count for. `devices`: the GPUs its worker leased ([] on a machine
    without GPUs: CPU processes). A Ray run's processes are placed by its cluster (RAY_DEVICE until its metrics
    say they are on GPUs)."""
    how = placement.launcher(spec, kind)
    per_node, nodes = placement.processes(spec)
    if how == placement.RAY:
        return [{"rank": r, "device": RAY_DEVICE} for r in range(per_node * nodes)]
    count = per_node if how == placement.TORCHRUN else 1
    procs = [{"rank": r, "device": f"gpu {devices[r]}" if r < len(devices) else CPU} for r in range(count)]
    if part is not None:
        procs = [{**p, "share": part} if is_gpu(p["device"]) else p for p in procs]
    return procs


def record(run_id: int, attempt: int, procs: list[dict[str, Any]], seconds: float, *, tokens_generated: int,
           tokens_trained: int, final: bool) -> None:  # fmt: skip
    """Write attempt `attempt`'s usage so far: each of `procs` ran `seconds` of wall time on its device (its
    `share` of it where it holds part of a shared GPU), and its
    step metrics counted these tokens; the run's totals become the sums over its attempts. `final`: the attempt
    has ended (a later write of it is ignored, so a process that hung and goes on cannot add to it)."""
    entry = {
        "processes": [{**p, "seconds": round(float(seconds), 3)} for p in procs],
        "tokens_generated": int(tokens_generated),
        "tokens_trained": int(tokens_trained),
        "final": bool(final),
        "at": timezone.now().isoformat(),
    }
    held = [(p["seconds"] * float(p.get("share", 1.0)), is_gpu(p["device"])) for p in entry["processes"]]
    entry["device_seconds"] = sum(s for s, _ in held)
    entry["gpu_seconds"] = sum(s for s, gpu in held if gpu)
    with transaction.atomic():
        run = Run.objects.select_for_update().only("usage").filter(pk=run_id).first()
        if run is None:
            return
        usage = run.usage if isinstance(run.usage, dict) else {}
        attempts = dict(usage.get("attempts") or {})
        if (attempts.get(str(attempt)) or {}).get("final"):
            return
        attempts[str(attempt)] = entry
        Run.objects.filter(pk=run_id).update(usage={**usage, "attempts": attempts}, **sums(attempts))


def is_gpu(device: str) -> bool:
    """Whether a process's device (as `processes` names it) is a GPU."""
    return device.startswith("gpu")


def sums(attempts: dict[str, dict[str, Any]]) -> dict[str, float | int]:
    """The Run fields (TOTAL_FIELDS) summed over `attempts` (Run.usage["attempts"])."""
    return {
        "device_seconds": float(sum(a.get("device_seconds", 0.0) for a in attempts.values())),
        "gpu_seconds": float(sum(a.get("gpu_seconds", 0.0) for a in attempts.values())),
        "tokens_generated": int(sum(a.get("tokens_generated", 0) for a in attempts.values())),
        "tokens_trained": int(sum(a.get("tokens_trained", 0) for a in attempts.values())),
    }


def gpu_seconds_used(team: Team, since: datetime) -> float:
    """GPU-seconds the team's runs used since `since`: the recorded gpu_seconds of attempts that ended since
    then, plus, for each running attempt, its elapsed time since `since` (or since it took its GPUs) × the GPUs
    it holds (studio.fleet's leases): the number a GPU-hours quota compares with its limit. Reads the team's
    runs that ended since `since` or have not ended (one query) and the running ones' leases (one more)."""
    from studio.fleet.models import GpuLease  # fleet imports runs: read here, when asked

    now = timezone.now()
    runs = Run.objects.filter(team=team).filter(Q(finished__gte=since) | Q(finished__isnull=True))
    total = 0.0
    running: dict[int, int] = {}
    for run_id, state, attempt, usage, gpu_seconds in runs.values_list(
        "pk", "state", "restarts", "usage", "gpu_seconds"
    ):
        attempts = (usage or {}).get("attempts") if isinstance(usage, dict) else None
        if attempts is None:  # recorded before attempts were kept, or never on a worker
            total += gpu_seconds if state != RUNNING else 0.0
        else:
            for number, entry in attempts.items():
                if state == RUNNING and number == str(attempt):
                    continue  # the running attempt: counted from its leases below, up to now
                if _ended_since(entry, since):
                    total += float(entry.get("gpu_seconds", 0.0))
        if state == RUNNING:
            running[run_id] = attempt
    held = GpuLease.objects.filter(run_id__in=running, run__state=RUNNING).values_list("taken", "shares")
    for taken, shares in held:  # a share of a shared GPU counts its part of the GPU's time
        total += max(0.0, (now - max(taken, since)).total_seconds()) / max(1, shares)
    return total


def _ended_since(entry: dict[str, Any], since: datetime) -> bool:
    at = entry.get("at")
    try:
        return datetime.fromisoformat(at) >= since
    except (TypeError, ValueError):
        return True  # no time recorded: counted, rather than letting GPU time go unbilled


@dataclass(frozen=True)
class Prices:
    """What a device-hour costs (settings.GPU_HOUR_PRICE, CPU_HOUR_PRICE; 0: not priced) and in what currency."""

    gpu_hour: float
    cpu_hour: float
    currency: str

    @classmethod
    def from_settings(cls) -> Prices:
        return cls(float(settings.GPU_HOUR_PRICE), float(settings.CPU_HOUR_PRICE), str(settings.PRICE_CURRENCY))

    @property
    def priced(self) -> bool:
        return self.gpu_hour > 0 or self.cpu_hour > 0

    def cost(self, gpu_seconds: float, device_seconds: float) -> float | None:
        """The cost of `gpu_seconds` on GPUs and the rest of `device_seconds` on CPUs; None when nothing is
        priced (the pages then show device-hours alone)."""
        if not self.priced:
            return None
        cpu_seconds = max(0.0, device_seconds - gpu_seconds)
        return gpu_seconds / 3600 * self.gpu_hour + cpu_seconds / 3600 * self.cpu_hour


def of_run(run: Run, prices: Prices | None = None) -> dict[str, Any]:
    """The run's usage as the API and the pages show it: device- and GPU-seconds, tokens, cost (None: not
    priced) and currency, and `final` (False while an attempt is still being recorded)."""
    prices = prices or Prices.from_settings()
    attempts = (run.usage or {}).get("attempts") or {} if isinstance(run.usage, dict) else {}
    return {
        "device_seconds": run.device_seconds,
        "gpu_seconds": run.gpu_seconds,
        "cpu_seconds": max(0.0, run.device_seconds - run.gpu_seconds),
        "tokens_generated": run.tokens_generated,
        "tokens_trained": run.tokens_trained,
        "cost": prices.cost(run.gpu_seconds, run.device_seconds),
        "currency": prices.currency if prices.priced else None,
        "attempts": len(attempts),
        "final": bool(attempts) and all(a.get("final") for a in attempts.values()),
    }
