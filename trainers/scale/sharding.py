"""The model sharded over a run's processes with PyTorch FSDP2 (`fully_shard` on a device mesh).

A run of several processes (`parallel.procs_per_node` x `parallel.nodes`: torchrun on one machine,
Ray across several) shards its policy and its reference model as `parallel.sharding` says:

- full: a 1-D mesh over every process. Each decoder layer is a unit, and the rest of the model
  (embeddings, final norm, head) the root unit; a unit's parameters, gradients and optimiser state
  are divided among all processes and its parameters gathered only while it computes.
- hybrid: a 2-D mesh (nodes, procs_per_node): divided within a node, replicated across nodes (HSDP).
- replicate: a 2-D mesh (processes, 1): every process holds everything and gradients are averaged
  (DDP, through the same code: the shard dimension has one process).

FSDP2 averages each gradient over the whole mesh (both dimensions); the loop scales each process's
loss by the process count, so the average is the gradient of the whole step's loss.

Every pass over a sharded model is collective: each unit all-gathers its parameters in the forward
(and again in the backward), and reduce-scatters its gradients. Every process must therefore run
the same passes in the same order; the loop agrees on the number of micro-batches first and runs
zero-weight passes where a process has fewer (trainers.run.loop). `run_pass` sends a pass through
the root unit, whose hooks gather the root's parameters whichever parts of the model the pass calls
(the logprob code calls the decoder and the head separately, never the model's own forward).

Gradient accumulation reduces once per step where that costs no memory (`ReduceOnLast`): replicate
keeps each micro-batch's gradient local and all-reduces the sum on the step's last backward (as DDP's
`no_sync`); hybrid reduce-scatters within the node on every backward (its gradients stay divided) and
all-reduces across nodes on the last only. Full sharding reduce-scatters on every backward: holding the
unreduced gradients until the last would keep a whole gradient on every process, which is what sharding
divides.

A single process is never sharded: its model is used as loaded, exactly as before.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard
from torch.distributed.tensor import DTensor

from trainers.scale.distributed import DistInfo
from trainers.spec import ParallelSpec

T = TypeVar("T")
_ROOT = "_rollout_studio_fsdp_root"  # where a sharded model keeps its root unit (in its __dict__)
_SHARDING = "_rollout_studio_sharding"  # and its parallel.sharding (how its gradients are reduced)


class ParallelError(ValueError):
    """The parallel settings cannot run as this job was launched (process count, no GPU for offload)."""


def check_parallel(parallel: ParallelSpec, info: DistInfo, *, cuda: bool) -> None:
    """Refuse, before anything loads, a job whose processes are not the ones the spec asks for, and
    settings this machine cannot honour. CPU offload is refused without CUDA (there is no device
    memory to save: the parameters are in CPU memory already) and for a single process, which is
    never sharded (offloading is a property of FSDP's shards)."""
    if info.world_size != parallel.world_size:
        launched = f"WORLD_SIZE={info.world_size}" if info.enabled else "a single process (no torchrun)"
        raise ParallelError(
            f"parallel asks for {parallel.procs_per_node} process(es) per node x {parallel.nodes} node(s) = "
            f"{parallel.world_size}, but this job is {launched}: launch it with `python -m trainers run` "
            "(which starts torchrun for parallel.procs_per_node) or with as many processes as the spec asks for"
        )
    if parallel.cpu_offload and not cuda:
        raise ParallelError(
            "parallel.cpu_offload keeps the shards in CPU memory to save GPU memory, and this machine has no "
            "CUDA GPU (everything is in CPU memory already): turn it off"
        )
    if parallel.cpu_offload and not info.enabled:
        raise ParallelError(
            "parallel.cpu_offload offloads FSDP's shards, and a single process is not sharded: turn it off, "
            "or run several processes (parallel.procs_per_node)"
        )


def build_mesh(parallel: ParallelSpec, info: DistInfo) -> DeviceMesh | None:
    """The mesh the model is sharded on (None for a single process, which is not sharded), after
    `check_parallel`. Every process of the job must call it (it creates process groups)."""
    cuda = torch.cuda.is_available()
    check_parallel(parallel, info, cuda=cuda)
    if not info.enabled:
        return None
    device = "cuda" if cuda else "cpu"
    if parallel.sharding == "full":
        return init_device_mesh(device, (info.world_size,), mesh_dim_names=("shard",))
    # 2-D: FSDP2 replicates over dimension 0 and shards over dimension 1 (HSDP); names are required.
    shape = (info.world_size, 1) if parallel.sharding == "replicate" else (parallel.nodes, parallel.procs_per_node)
    return init_device_mesh(device, shape, mesh_dim_names=("replicate", "shard"))


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's decoder layers: modules of the classes it names in `_no_split_modules` (what
    transformers keeps whole on one device: LlamaDecoderLayer, Qwen2DecoderLayer, ...), found
    under a peft wrapper too."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or ())
    return [m for m in base.modules() if type(m).__name__ in names]


class ShardedRoot(torch.nn.Module):
    """The root FSDP unit: holds the model, and its forward runs whatever pass it is given, so that
    FSDP's root hooks (gathering the parameters outside the decoder layers, finishing the backward's
    reduce-scatters) run for passes that never call the model's own forward."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, fn: Callable[[], T]) -> T:
        return fn()


def fsdp_policies(parallel: ParallelSpec) -> dict[str, Any]:
    """`fully_shard`'s mixed-precision and offload arguments for the settings."""
    mixed = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if parallel.mixed_precision == "bf16"
        else MixedPrecisionPolicy()
    )
    return {"mp_policy": mixed, "offload_policy": CPUOffloadPolicy() if parallel.cpu_offload else OffloadPolicy()}


def shard_model(model: torch.nn.Module, mesh: DeviceMesh, parallel: ParallelSpec) -> None:
    """Shard `model` in place on `mesh`: each decoder layer, then the rest under a `ShardedRoot`.
    Call it on every process, after every process holds the same weights (broadcast) and after
    activation checkpointing is enabled; its parameters become DTensors (this process's shard)."""
    policies = fsdp_policies(parallel)
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, **policies)
    root = ShardedRoot(model)
    fully_shard(root, mesh=mesh, **policies)
    # In __dict__, not as an attribute nn.Module would register: the root holds the model already.
    model.__dict__[_ROOT] = root
    model.__dict__[_SHARDING] = parallel.sharding


def is_sharded(model: Any) -> bool:
    return isinstance(model, torch.nn.Module) and _ROOT in model.__dict__


def run_pass(model: Any, fn: Callable[[], T]) -> T:
    """`fn()`, a forward pass over `model`: through its root unit when it is sharded (the backward
    of what it returns then reduce-scatters the gradients), directly otherwise. Every process of a
    sharded model must run the same passes. Outside a pass every parameter is a shard: FSDP keeps
    the root's gathered after a forward for the backward that follows, so a pass without gradient
    (nothing follows) gives them back at once."""
    root = model.__dict__.get(_ROOT) if isinstance(model, torch.nn.Module) else None
    if root is None:
        return fn()
    out = root(fn)
    if not torch.is_grad_enabled():
        root.reshard()
    return out


class ReduceOnLast:
    """A step's `passes` backward passes (gradient accumulation), each one's gradient reduction set before
    it runs (`next_pass`): replicate reduces on the last pass only, hybrid within the node on every pass and
    across nodes on the last, full on every pass (the module docstring says why); not sharded, nothing.
    Every process must run as many passes (trainers.update.lockstep). The last pass sets the default (a
    reduction on every backward) back; a plan broken off is overridden by the next one's first pass."""

    def __init__(self, model: Any, passes: int) -> None:
        root = model.__dict__[_ROOT] if is_sharded(model) else None
        sharding = model.__dict__.get(_SHARDING) if root is not None else None
        self._defer: Callable[..., None] | None = None
        if sharding == "replicate":
            self._defer = root.set_requires_gradient_sync
        elif sharding == "hybrid":
            self._defer = root.set_requires_all_reduce
        self.passes = passes
        self.done = 0

    def next_pass(self) -> None:
        """Call before each pass's backward (its units' post-backward hooks read the setting)."""
        self.done += 1
        if self._defer is not None:
            self._defer(self.done >= self.passes, recurse=True)


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a DTensor (a collective over its mesh: every process calls it for the
    same tensor); any other tensor as it is."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def full_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A whole, frozen copy of `model` to sample from, taken before it is sharded: with a peft model,
    the base model with the adapters merged in, named as the model's own checkpoint (the names
    `trainers.rollout.engines.vllm_weights.export_weights` gives, which is how it is refreshed)."""
    copied = copy.deepcopy(model)
    if hasattr(copied, "merge_and_unload"):
        copied = copied.merge_and_unload()
    copied.requires_grad_(False)
    # It never trains: no activation checkpointing (which would keep the logprob pass from sharing
    # a group's prompt), and no hook making the embeddings' output require a gradient (LoRA's).
    if getattr(copied, "is_gradient_checkpointing", False):
        copied.gradient_checkpointing_disable()
    if hasattr(copied, "_require_grads_hook"):
        copied.disable_input_require_grads()
    return copied


@torch.no_grad()
def copy_weights_into(model: torch.nn.Module, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
    """Copy (name, tensor) pairs into `model`'s tensors of those names, one at a time; returns how
    many. A name the model lacks raises KeyError (the copy no longer matches the policy)."""
    state = model.state_dict()  # detached views of the live tensors: copy_ writes into the model
    count = 0
    for name, tensor in weights:
        state[name].copy_(tensor)
        count += 1
    return count
