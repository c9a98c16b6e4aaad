"""One process of the exact-loss check in test_distributed.py (under torchrun, or alone for the
reference): the trainer's optimisation pass on a fixed batch of unequal-length completions, for
each loss aggregation mode and each way of splitting the batch; saves the gradient each pass
steps with (the optimiser's step is replaced by a capture, which gathers a sharded gradient
whole), the no-grad logprobs of each split, and the policy's exported weights.

The spec says how the processes shard the model (`parallel`); a LoRA spec gets adapters whose B
is not zero (as after some training), so that A has a gradient and merging them changes the
exported weights. With a KL term, the reference's no-grad pass comes first in each split (a LoRA
run's turns the adapters off and on again: they must still train after it).

The filtered split's token-mean pass (three micro-batches on rank 0, three idle passes elsewhere) also
counts the gradient collectives FSDP runs (`reductions-world<W>-rank<R>.json`), then runs again with a
reduction after every backward, as before gradient accumulation reduced once per step ("every-pass/..."):
the two gradients must agree."""

import json
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

from trainers.report import MemoryReporter
from trainers.rollout.engines.vllm_weights import export_weights
from trainers.run.loop import Trainer
from trainers.scale import sharding
from trainers.scale.sharding import full_tensor
from trainers.spec import RunSpec
from trainers.update import passes as passes_module
from trainers.update.batches import TokenBatch

PROMPT = [1, 5, 6]
COMPLETIONS = [[7, 8], [9, 10, 11, 12, 13], [14], [15, 16, 17, 18, 19, 20, 21, 22], [23, 24, 25]]
ADVANTAGES = [1.0, -0.5, 0.25, 2.0, -1.0]
MODES = ["token-mean", "seq-mean-token-mean", "token-sum"]


def rows_of(split: str, rank: int, world: int) -> list[int]:
    """'shard': every world-th row from the rank's own; 'filtered': everything on rank 0, none
    elsewhere (as when dynamic sampling drops every group of a process)."""
    rows = list(range(len(COMPLETIONS)))
    if split == "shard":
        return rows[rank::world]
    return rows if rank == 0 else []


@contextmanager
def fsdp_collectives(counts: Counter):
    """Count the gradient collectives FSDP2 itself calls (all-reduce across replicas, reduce-scatter within
    a shard group): the wrappers count a call only when it comes from FSDP's collectives module."""
    originals = {"all_reduce": dist.all_reduce, "reduce_scatter_single": dist.reduce_scatter_single}

    def counted(name):
        def call(*args, **kwargs):
            if sys._getframe(1).f_code.co_filename.endswith("_fsdp_collectives.py"):
                counts[name] += 1
            return originals[name](*args, **kwargs)

        return call

    for name in originals:
        setattr(dist, name, counted(name))
    try:
        yield counts
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


BACKWARDS = Counter()  # backward passes of the counted optimisation pass


class CountedReduceOnLast(sharding.ReduceOnLast):
    """The trainer's own plan (one reduction per step), counting the backward passes it is told of."""

    def next_pass(self) -> None:
        BACKWARDS["passes"] += 1
        super().next_pass()


class ReduceEveryPass(sharding.ReduceOnLast):
    """The behaviour before one reduction per step: FSDP's default, a reduction after every backward."""

    def next_pass(self) -> None:
        BACKWARDS["passes"] += 1
        self.done += 1


def main(spec_path: str, out_dir: str) -> None:
    spec = RunSpec.model_validate_json(Path(spec_path).read_text())
    trainer = Trainer(spec, MemoryReporter())
    rank, world = trainer.dist.rank, trainer.dist.world_size
    if spec.model.lora is not None:
        with torch.no_grad():
            for name, p in trainer.model.named_parameters():
                if "lora_B" in name:
                    p.fill_(0.01)  # a DTensor when sharded: every shard, the same value everywhere
    captured: dict[str, torch.Tensor] = {}

    def capture() -> None:  # every process steps together: the gathers below are in step
        captured.update(
            {n: full_tensor(p.grad).clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        )

    trainer.optimizer.step = capture
    out = {}
    reductions = {}
    # FSDP's units: each decoder layer, and the root (which holds the model, so is not among its modules)
    units = sum(isinstance(m, FSDPModule) for m in trainer.model.modules()) + 1
    for split in ("shard", "filtered"):
        mine = rows_of(split, rank, world)
        batch = None
        if mine:
            batch = TokenBatch.build([PROMPT] * len(mine), [COMPLETIONS[i] for i in mine],
                                     pad_id=trainer.lockstep.pad_id, device=trainer.device)  # fmt: skip
        if trainer.reference is not None:  # (a LoRA run's: the policy with its adapters off, sharded with it)
            with trainer.reference.context():
                trainer.update.frozen(trainer.reference.model, batch)[0]
        logp = trainer.update.frozen(trainer.model, batch)[0]
        out[f"logprobs/{split}"] = {i: logp[k, : len(COMPLETIONS[i])].clone() for k, i in enumerate(mine)}
        for mode in MODES:
            trainer.spec.algorithm.loss_agg_mode = mode
            counted = split == "filtered" and mode == "token-mean"
            for case in ("once", "every") if counted else ("once",):
                captured.clear()
                BACKWARDS.clear()
                passes_module.ReduceOnLast = CountedReduceOnLast if case == "once" else ReduceEveryPass
                try:
                    with fsdp_collectives(Counter()) as counts:
                        optimise(trainer, batch, mine)
                finally:
                    passes_module.ReduceOnLast = sharding.ReduceOnLast
                out[f"{mode}/{split}" if case == "once" else f"every-pass/{split}"] = dict(captured)
                if counted:
                    reductions[case] = dict(counts) | {"units": units, "passes": BACKWARDS["passes"]}
    out["export"] = {name: t.clone() for name, t in export_weights(trainer.model)}  # every process gathers
    torch.save(out, Path(out_dir) / f"grads-world{world}-rank{rank}.pt")
    Path(out_dir, f"reductions-world{world}-rank{rank}.json").write_text(json.dumps(reductions))
    trainer.close()


def optimise(trainer: Trainer, batch: TokenBatch | None, rows: list[int]) -> None:
    """The trainer's optimisation pass on `batch` (the given rows' completions), or its part without data."""
    if batch is None:
        trainer.update.optimise.join_without_data()
        return
    mask = batch.completion_mask
    advantages = torch.tensor([ADVANTAGES[i] for i in rows], device=trainer.device)[:, None] * mask
    trainer.update.optimise(batch, mask, advantages, None, None, None)


if __name__ == "__main__":
    main(*sys.argv[1:3])
