"""One process of the sharded-checkpoint checks in test_sharded_checkpoint.py, under torchrun (gloo, CPU).

    save   SPEC OUT   shard the tiny model (FSDP2, as trainers.scale.sharding does), take two
                      AdamW steps, checkpoint after each (the second also exported as a
                      transformers folder), then take a third step as if never interrupted
    resume SPEC OUT CHECKPOINT
                      shard the tiny model over this run's processes, resume from CHECKPOINT
                      (sharded, or from before sharding), take the next step

Every process computes the loss of the whole fixed batch, so the gradient FSDP averages over the
processes is the whole batch's at any number of processes (up to the rounding of that average):
runs at different sizes are comparable step by step. Each writes what it saw to OUT/<mode>-world<W>-rank<R>.pt;
rank 0 adds the full parameters and optimiser state, gathered (`full_tensor`), at each point.
"""

import copy
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.distributed.device_mesh import init_device_mesh

from trainers.models.loading import load_policy, trainable_parameters
from trainers.run.checkpoint import initial_weights, load_trainer_state, save_checkpoint
from trainers.scale.distributed import DistInfo, broadcast_parameters
from trainers.scale.sharded_state import full_model_state, full_optimizer_state
from trainers.scale.sharding import run_pass, shard_model
from trainers.spec import ParallelSpec, RunSpec

SEQUENCES = [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [20, 21, 22, 23, 24], [30, 31, 32, 33, 34]]
LR = 1e-2


class Counter:
    """A stand-in for the data source, curriculum and engine: state that moves once per step."""

    def __init__(self, start: int = 0) -> None:
        self.n = start

    def state_dict(self) -> dict[str, int]:
        return {"n": self.n}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.n = state["n"]


@dataclass
class Run:
    """What `save_checkpoint` / `load_trainer_state` read and write (the Trainer's attributes)."""

    spec: RunSpec
    model: Any
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    source: Counter
    curriculum: Counter
    engine: Counter
    step_count: int = 0
    hinter: Any = None
    last_checkpoint: str | None = None
    validation_pending: bool = False


def new_run(spec: RunSpec, rank: int = 0, world: int = 1, *, resume_from: str | None = None, shard: bool = True) -> Run:
    """The policy as the Trainer loads it (from `model.path`, or an old checkpoint's weights; with
    LoRA adapters when the spec has them), sharded over `world` processes unless `shard` is False,
    its optimiser and schedule."""
    device = torch.device("cpu")
    model, tokenizer = load_policy(spec.model, device, checkpoint=initial_weights(resume_from))
    broadcast_parameters(model, DistInfo(rank=rank, world_size=world))  # fresh adapters: rank 0's
    if shard:  # as the Trainer shards (full sharding: a 1-D mesh over every process)
        shard_model(model, init_device_mesh("cpu", (world,)), ParallelSpec(procs_per_node=world))
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=LR, weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (s + 1))
    # Each process's engine state differs (as vLLM's per-process prompt counts do).
    return Run(spec, model, tokenizer, optimizer, scheduler, Counter(), Counter(), Counter(100 * rank))


def take_step(run: Run) -> None:
    ids = torch.tensor(SEQUENCES)
    loss = run_pass(run.model, lambda: run.model(input_ids=ids, labels=ids).loss)
    loss.backward()  # the whole batch's loss, on every process
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.scheduler.step()
    run.step_count += 1
    for counter in (run.source, run.curriculum, run.engine):
        counter.n += 1


def gathered(run: Run) -> dict[str, Any]:
    """The full parameters and optimiser state (rank 0; {} elsewhere), copied: on one process the
    gathered tensors are the live ones, which the next step would change."""
    state = {"params": full_model_state(run.model), "optim": full_optimizer_state(run.model, run.optimizer)}
    return copy.deepcopy(state)


def next_draws() -> dict[str, Any]:
    """What python's, numpy's and torch's generators give next (consumes them)."""
    return {"python": random.random(), "numpy": float(np.random.rand()), "torch": torch.rand(3).tolist()}


def logits(run: Run) -> torch.Tensor:
    with torch.no_grad():
        return run_pass(run.model, lambda: run.model(input_ids=torch.tensor(SEQUENCES)).logits)


def save(run: Run, rank: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    torch.manual_seed(1000 + rank)  # every process's generators differ
    random.seed(2000 + rank)
    np.random.seed(3000 + rank)
    take_step(run)
    out["step1"] = gathered(run)
    out["path1"] = str(save_checkpoint(run))  # not the last step: shards only
    take_step(run)
    out["saved"] = gathered(run)
    out["lr"] = run.scheduler.get_last_lr()[0]
    out["logits"] = logits(run)
    out["path2"] = str(save_checkpoint(run, final=True))  # shards and a transformers folder
    out["draws"] = next_draws()
    out["engine"] = run.engine.state_dict()
    take_step(run)
    out["next"] = gathered(run)
    return out


def resume(run: Run, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    load_trainer_state(run, path)
    out["resumed"] = gathered(run)
    out["step"] = run.step_count
    out["counters"] = (run.source.n, run.curriculum.n)
    out["lr"] = run.scheduler.get_last_lr()[0]
    out["draws"] = next_draws()
    out["engine"] = run.engine.state_dict()
    take_step(run)
    out["next"] = gathered(run)
    return out


def main(mode: str, spec_path: str, out_dir: str, checkpoint: str = "") -> None:
    torch.distributed.init_process_group("gloo")  # also at world 1: FSDP2 needs a device mesh
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    spec = RunSpec.model_validate_json(Path(spec_path).read_text())
    run = new_run(spec, rank, world, resume_from=checkpoint or None)
    out = save(run, rank) if mode == "save" else resume(run, checkpoint)
    torch.save(out, Path(out_dir) / f"{mode}-world{world}-rank{rank}.pt")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
