"""One run over several processes: where each process stands, and the collectives the loop uses.

`python -m trainers run spec.yaml` with `parallel.procs_per_node` N > 1 re-executes itself as N
processes under `torch.distributed.run` (`launch`); several nodes are started by Ray, which sets
the same variables. Each process owns one GPU (LOCAL_RANK), its own rollout engine (vLLM
colocated on that GPU, or transformers), and a 1/N share of each step's prompts (`shard`). The
model is sharded over the processes with FSDP2 (`trainers.scale.sharding`), which reduces the
gradients; rank 0 alone reports.

With the CPU build (no GPU) the same code runs on the gloo backend, which the tests use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from trainers.report import COUNTS_PREFIX

T = TypeVar("T")


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


def torchrun_command(
    argv: Sequence[str], nproc: int, module: str = "trainers", options: Sequence[str] = ()
) -> list[str]:
    """The command that runs `python -m <module> <argv>` as `nproc` processes on this machine;
    `options` are torchrun's own (log folder, redirects). torchrun reads every option that looks
    like one of its own, abbreviated too, so `argv` must not hold one (`--nproc` would be taken
    for its --nproc-per-node)."""
    if nproc < 1:
        raise ValueError(f"processes per node must be >= 1, got {nproc}")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # one machine: rendezvous on a free local port
        f"--nproc_per_node={nproc}",
        *options,
        "-m",
        module,
        *argv,
    ]


def launch(argv: Sequence[str], nproc: int) -> int:
    """Run the CLI again, with the same arguments, under torchrun with `nproc` processes; returns its
    exit code. The CLI calls this when the spec asks for `parallel.procs_per_node` > 1 and it is not
    already a child (the children see WORLD_SIZE and run)."""
    if nproc > 1 and torch.cuda.is_available() and torch.cuda.device_count() < nproc:
        raise ValueError(f"parallel.procs_per_node is {nproc} but only {torch.cuda.device_count()} GPU(s) are visible")
    return subprocess.call(torchrun_command(argv, nproc))


def init_distributed(info: DistInfo | None = None) -> DistInfo:
    """Join the process group (NCCL on GPUs, gloo on CPU) and pick this process's GPU.
    A single process (no torchrun) returns at once."""
    info = info or dist_info()
    if not info.enabled or torch.distributed.is_initialized():
        return info
    if torch.cuda.is_available():
        if info.local_rank >= (visible := torch.cuda.device_count()):
            # Else CUDA's "invalid device ordinal" from every process past the last GPU, and NCCL would not
            # share one GPU between two processes either.
            raise ValueError(
                f"process {info.local_rank} on this machine needs a GPU of its own and {visible} are visible "
                "(CUDA_VISIBLE_DEVICES): start at most that many processes per machine (parallel.procs_per_node)"
            )
        torch.cuda.set_device(info.local_rank)
        # gloo beside NCCL for CPU tensors: FSDP's CPU offload keeps shards (and their gradient
        # norms, gathered by clipping) in CPU memory, and NCCL moves GPU tensors only.
        backend = "cuda:nccl,cpu:gloo"
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


def max_over_processes(value: int, info: DistInfo, device: torch.device | str = "cpu") -> int:
    """The largest `value` of any process (every process gets the same answer)."""
    if not info.enabled:
        return value
    tensor = torch.tensor([value], dtype=torch.long, device=device)
    torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
    return int(tensor.item())


def gathered_lists(items: list[T], info: DistInfo) -> list[T]:
    """Every process's `items`, concatenated in rank order (itself alone). Every process must call it."""
    if not info.enabled:
        return list(items)
    gathered: list[list[T] | None] = [None] * info.world_size
    torch.distributed.all_gather_object(gathered, list(items))
    return [item for part in gathered for item in part or []]


def mean_over_processes(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Each metric averaged over the processes that report it (a process whose groups were all
    filtered out has no actor/ metrics that step); counts (COUNTS_PREFIX: the step's tokens) summed
    instead. Every process gets the same dict."""
    if not info.enabled:
        return dict(values)
    gathered: list[dict[str, float] | None] = [None] * info.world_size
    torch.distributed.all_gather_object(gathered, dict(values))
    keys = sorted({k for d in gathered if d for k in d})
    sums = {k: sum(d[k] for d in gathered if d and k in d) for k in keys}
    return {
        k: v if k.startswith(COUNTS_PREFIX) else v / sum(1 for d in gathered if d and k in d) for k, v in sums.items()
    }


def cleanup(info: DistInfo) -> None:
    if info.enabled and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
