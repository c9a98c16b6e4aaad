"""One run on several GPUs of one machine: data parallel, launched with torchrun.

`python -m trainers run spec.yaml --nproc N` re-executes itself as N processes under
`torch.distributed.run` (`launch`). Each process owns one GPU (LOCAL_RANK), its own
rollout engine (vLLM colocated on that GPU, or transformers), and a 1/N share of each
step's prompts (`shard`). Gradients are averaged over processes before clipping
(`average_gradients`), so every process applies the same update and the weights stay
identical; rank 0 alone reports and writes checkpoints.

With the CPU build (no GPU) the same code runs on the gloo backend, which the tests use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

T = TypeVar("T")
BUCKET_BYTES = 64 * 2**20  # gradients are all-reduced in flat buckets of about this size


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def dist_info(env: dict[str, str] | None = None) -> DistInfo:
    """This process's place in the job, from the variables torchrun sets (a single process without them)."""
    env = os.environ if env is None else env
    return DistInfo(
        rank=int(env.get("RANK", 0)), local_rank=int(env.get("LOCAL_RANK", 0)), world_size=int(env.get("WORLD_SIZE", 1))
    )


def torchrun_command(argv: Sequence[str], nproc: int, module: str = "trainers") -> list[str]:
    """The command that runs `python -m <module> <argv>` as `nproc` processes on this machine."""
    if nproc < 1:
        raise ValueError(f"--nproc must be >= 1, got {nproc}")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # one machine: rendezvous on a free local port
        f"--nproc_per_node={nproc}",
        "-m",
        module,
        *argv,
    ]


def without_nproc(argv: Sequence[str]) -> list[str]:
    """`argv` without `--nproc N` / `--nproc=N` (the children must not launch again)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out


def launch(argv: Sequence[str], nproc: int) -> int:
    """Run the CLI again under torchrun with `nproc` processes; returns its exit code.
    The CLI calls this when it was given `--nproc N` with N > 1 and is not already a child."""
    if nproc > 1 and torch.cuda.is_available() and torch.cuda.device_count() < nproc:
        raise ValueError(f"--nproc {nproc} but only {torch.cuda.device_count()} GPU(s) are visible")
    return subprocess.call(torchrun_command(without_nproc(argv), nproc))


def init_distributed(info: DistInfo | None = None) -> DistInfo:
    """Join the process group (NCCL on GPUs, gloo on CPU) and pick this process's GPU.
    A single process (no torchrun) returns at once."""
    info = info or dist_info()
    if not info.enabled or torch.distributed.is_initialized():
        return info
    if torch.cuda.is_available():
        torch.cuda.set_device(info.local_rank)
        backend = "nccl"
    else:
        backend = "gloo"
    torch.distributed.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size)
    return info


def device_for(info: DistInfo) -> torch.device:
    return torch.device("cuda", info.local_rank) if torch.cuda.is_available() else torch.device("cpu")


def shard(items: Sequence[T], info: DistInfo) -> list[T]:
    """This process's share of a step's items (every world_size-th, starting at its rank).
    Every process draws the same global batch (same data seed), so shares never overlap."""
    return list(items[info.rank :: info.world_size])


def broadcast_parameters(model: torch.nn.Module, info: DistInfo) -> None:
    """Copy rank 0's parameters and buffers to every process (freshly initialised LoRA
    adapters, for one, differ per process otherwise)."""
    if not info.enabled:
        return
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            torch.distributed.broadcast(tensor.data, src=0)


def _buckets(tensors: Iterable[torch.Tensor], max_bytes: int) -> Iterable[list[torch.Tensor]]:
    bucket: list[torch.Tensor] = []
    size = 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        if bucket and (size + nbytes > max_bytes or t.dtype != bucket[0].dtype):
            yield bucket
            bucket, size = [], 0
        bucket.append(t)
        size += nbytes
    if bucket:
        yield bucket


def average_gradients(parameters: Iterable[torch.nn.Parameter], info: DistInfo) -> None:
    """Replace each gradient with its mean over processes (call after the micro-batches'
    backward passes, before clipping). Parameters without a gradient on this process count
    as zero, so every process issues the same collectives."""
    if not info.enabled:
        return
    params = [p for p in parameters if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    for bucket in _buckets([p.grad for p in params], BUCKET_BYTES):
        flat = torch._utils._flatten_dense_tensors(bucket)
        torch.distributed.all_reduce(flat)
        flat /= info.world_size
        for grad, synced in zip(bucket, torch._utils._unflatten_dense_tensors(flat, bucket), strict=True):
            grad.copy_(synced)


def sum_over_processes(value: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """`value` (a tensor) summed over the processes; itself alone. Every process must call it."""
    if not info.enabled:
        return value
    total = value.detach().clone()
    torch.distributed.all_reduce(total)
    return total


def any_process(flag: bool, info: DistInfo, device: torch.device | str = "cpu") -> bool:
    """Whether `flag` holds on at least one process (every process gets the same answer)."""
    if not info.enabled:
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
    return bool(value.item())


def gathered_lists(items: list[T], info: DistInfo) -> list[T]:
    """Every process's `items`, concatenated in rank order (itself alone). Every process must call it."""
    if not info.enabled:
        return list(items)
    gathered: list[list[T] | None] = [None] * info.world_size
    torch.distributed.all_gather_object(gathered, list(items))
    return [item for part in gathered for item in part or []]


def mean_over_processes(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Each metric averaged over the processes that report it (a process whose groups were all
    filtered out has no actor/ metrics that step). Every process gets the same dict."""
    if not info.enabled:
        return dict(values)
    gathered: list[dict[str, float] | None] = [None] * info.world_size
    torch.distributed.all_gather_object(gathered, dict(values))
    keys = sorted({k for d in gathered if d for k in d})
    return {k: sum(d[k] for d in gathered if d and k in d) / sum(1 for d in gathered if d and k in d) for k in keys}


def cleanup(info: DistInfo) -> None:
    if info.enabled and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


class NullReporter:
    """What ranks other than 0 report to: nothing (rank 0 speaks for the job)."""

    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def rollouts(self, step: int, rollouts: list[Any]) -> None: ...
    def status(self, state: str, detail: str = "") -> None: ...
    def checkpoint(self, step: int, path: str) -> None: ...
    def log(self, line: str) -> None: ...
    def warning(self, step: int | None, message: str) -> None: ...
    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None: ...
