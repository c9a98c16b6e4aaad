"""A run on a share of a GPU: its part of the device's memory, told to the process and to the engines in it.

A worker that shares its GPUs (the studio's STUDIO_GPU_SHARE) runs several one-process runs on one GPU. Each
is told its part (`share`): the process's CUDA caching allocator is capped at that fraction of the device
(torch.cuda.set_per_process_memory_fraction: an allocation past it raises an out-of-memory error in this run,
not in its neighbour), and a colocated vLLM engine reads the part from the environment (MEMORY_SHARE_ENV) and
scales its `rollout.vllm_gpu_memory_utilization` by it (`scaled_utilization`), so the setting keeps meaning "of
the GPU the run has". Outside a share nothing changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

MEMORY_SHARE_ENV = "TRAINERS_GPU_MEMORY_SHARE"


def current(env: dict[str, str] | None = None) -> float | None:
    """The part of its GPU this process has (0 < part <= 1), or None when it has the whole GPU. ValueError for a
    value that is not such a number (a typo must not silently give a run the whole GPU)."""
    raw = (os.environ if env is None else env).get(MEMORY_SHARE_ENV, "").strip()
    if not raw:
        return None
    try:
        part = float(raw)
    except ValueError:
        raise ValueError(f"{MEMORY_SHARE_ENV} must be a number in (0, 1], got {raw!r}") from None
    if not 0 < part <= 1:
        raise ValueError(f"{MEMORY_SHARE_ENV} must be a number in (0, 1], got {raw!r}")
    return None if part == 1 else part


def scaled_utilization(setting: float, env: dict[str, str] | None = None) -> float:
    """vLLM's gpu_memory_utilization (a fraction of the whole device) for a run whose setting is `setting` of
    its share: 0.3 of a quarter GPU is 0.075 of the device."""
    part = current(env)
    return setting if part is None else round(setting * part, 6)


def cap_allocator(part: float) -> bool:
    """Cap this process's CUDA allocations at `part` of its device; False (nothing done) without CUDA."""
    import torch  # here: the studio imports this package's schema without torch

    if not torch.cuda.is_available():
        return False
    torch.cuda.set_per_process_memory_fraction(part)
    return True


@contextmanager
def share(part: float | None) -> Iterator[None]:
    """While inside: this process runs on `part` of its GPU (None: the whole GPU, nothing changes). The pool
    process that runs the run serves other runs after it, so the environment and the cap are put back."""
    if part is None:
        yield
        return
    before = os.environ.get(MEMORY_SHARE_ENV)
    os.environ[MEMORY_SHARE_ENV] = repr(part)
    capped = cap_allocator(part)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(MEMORY_SHARE_ENV, None)
        else:
            os.environ[MEMORY_SHARE_ENV] = before
        if capped:
            cap_allocator(1.0)
