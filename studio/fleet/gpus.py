"""What GPUs this machine has, read from `nvidia-smi` (standard library only).

Asking nvidia-smi rather than torch keeps CUDA uninitialised in the Celery parent
process: a CUDA context made before the pool forks would make every child's CUDA fail.
The launcher uses `default_concurrency` to start one pool process per GPU (or per share of one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

QUERY = "index,name,memory.total,memory.used,utilization.gpu"
MIB_PER_GB = 1024


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]" on some boards
        return None


def parse_nvidia_smi(csv_text: str) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-gpu=<QUERY> --format=csv,noheader,nounits` as dicts
    {index, name, memory_total_gb, memory_used_gb, utilization}."""
    gpus = []
    for line in csv_text.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 5:
            continue
        index, name, total, used, util = fields
        total_mib, used_mib = _number(total), _number(used)
        gpus.append(
            {
                "index": int(index),
                "name": name,
                "memory_total_gb": round(total_mib / MIB_PER_GB, 1) if total_mib is not None else None,
                "memory_used_gb": round(used_mib / MIB_PER_GB, 2) if used_mib is not None else None,
                "utilization": _number(util),
            }
        )
    return gpus


def visible_indices(env: dict[str, str] | None = None) -> list[int] | None:
    """Physical GPU indices named by CUDA_VISIBLE_DEVICES, or None when it is unset or uses
    UUIDs (then every GPU counts)."""
    value = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        return None
    return [int(p) for p in parts]


def detect_gpus(env: dict[str, str] | None = None, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The GPUs this process may use (respecting CUDA_VISIBLE_DEVICES); [] without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []  # a broken driver reports as "no GPU", the worker still serves CPU queues
    gpus = parse_nvidia_smi(out)
    wanted = visible_indices(env)
    if wanted is not None:
        gpus = [g for g in gpus if g["index"] in wanted]
    return gpus


def default_concurrency(queues: list[str] | str, gpus: list[dict[str, Any]] | None = None,
                        share: int | None = None) -> int:  # fmt: skip
    """One pool process per GPU for a worker that serves the gpu queue, or `share` per GPU on a worker that
    shares its GPUs (STUDIO_GPU_SHARE; read here because the launcher calls this before Django's settings
    load, and settings.GPU_SHARE refuses a bad value when the worker starts); 1 otherwise."""
    names = queues.split(",") if isinstance(queues, str) else queues
    if "gpu" not in [q.strip() for q in names]:
        return 1
    if share is None:
        raw = os.environ.get("STUDIO_GPU_SHARE", "").strip()
        share = int(raw) if raw.isdigit() else 1
    share = max(1, share)
    return max(1, len(detect_gpus() if gpus is None else gpus) * share)
