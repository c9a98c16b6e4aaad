"""Where a run's processes run, decided in one place: the studio refuses at launch what no launcher
here can start, and the worker picks its launcher with the same function (`launcher`).

- IN_PROCESS: one process (parallel.world_size 1, and every evaluation: trainers.run.evaluate is one
  process). The trainer runs inside the Celery pool process, on that process's GPU.
- TORCHRUN: several processes on one machine (parallel.nodes 1): torchrun, started by the worker that
  leased their GPUs (workers.torchrun).
- RAY: several machines (parallel.nodes > 1): a Ray cluster (settings.RAY_ADDRESS). Without one such a
  run is refused at launch (`refusal`); the worker hands it to `workers.ray_launch`.

Reads the stored spec dict (the studio never builds a RunSpec to decide), so it imports no torch.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

IN_PROCESS, TORCHRUN, RAY = "in-process", "torchrun", "ray"


def processes(spec: dict[str, Any]) -> tuple[int, int]:
    """(processes per node, nodes) the spec asks for; (1, 1) for a spec without a parallel section."""
    parallel = spec.get("parallel") or {}
    return int(parallel.get("procs_per_node") or 1), int(parallel.get("nodes") or 1)


def launcher(spec: dict[str, Any], kind: str = "train") -> str:
    """IN_PROCESS, TORCHRUN or RAY: how the worker starts this run's processes."""
    if kind != "train":
        return IN_PROCESS
    per_node, nodes = processes(spec)
    if nodes > 1:
        return RAY
    return TORCHRUN if per_node > 1 else IN_PROCESS


def local_gpus(spec: dict[str, Any], kind: str = "train") -> int:
    """GPUs the worker that takes the run must lease on its own machine (when it has GPUs): one per
    local process; none for a Ray run, whose cluster places its processes."""
    how = launcher(spec, kind)
    if how == RAY:
        return 0
    return processes(spec)[0] if how == TORCHRUN else 1


def refusal(spec: dict[str, Any], kind: str = "train") -> str | None:
    """Why no worker here could start the run (None: one can)."""
    if launcher(spec, kind) == RAY and not settings.RAY_ADDRESS:
        per_node, nodes = processes(spec)
        return (f"a run on {nodes} nodes needs a Ray cluster, and this studio has none configured: set "
                f"RAY_ADDRESS (or STUDIO_RAY_ADDRESS) to the cluster's address, see docs/gpu-workers.md; "
                f"or use parallel.nodes 1 ({per_node} processes on one machine)")  # fmt: skip
    return None


def describe(spec: dict[str, Any], kind: str = "train", devices: list[str] | None = None) -> str:
    """Where the run runs, as the run page says it: "2 processes on GPUs 0, 1", "2 CPU processes (gloo)"."""
    how = launcher(spec, kind)
    per_node, nodes = processes(spec)
    if how == RAY:
        return f"{per_node * nodes} processes: {per_node} per node × {nodes} nodes (Ray)"
    count = per_node if how == TORCHRUN else 1
    noun = "process" if count == 1 else "processes"
    if devices:
        return f"{count} {noun} on GPU{'s' if len(devices) > 1 else ''} {', '.join(devices)}"
    return f"{count} {noun} on CPU" + (" (gloo)" if count > 1 else "")
