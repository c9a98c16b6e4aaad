"""One process of the exact-loss check in test_distributed.py (under torchrun, or alone for the
reference): the trainer's optimisation pass on a fixed batch of unequal-length completions, for
each loss aggregation mode and each way of splitting the batch; saves the gradient each pass
steps with (the optimiser's step is replaced by a capture, which gathers a sharded gradient
whole), the no-grad logprobs of each split, and the policy's exported weights.

The spec says how the processes shard the model (`parallel`); a LoRA spec gets adapters whose B
is not zero (as after some training), so that A has a gradient and merging them changes the
exported weights. With a KL term, the reference's no-grad pass comes first in each split (a LoRA
run's turns the adapters off and on again: they must still train after it)."""

import sys
from pathlib import Path

import torch

from trainers.report import MemoryReporter
from trainers.rollout.engines.vllm_weights import export_weights
from trainers.run.loop import Trainer
from trainers.scale.sharding import full_tensor
from trainers.spec import RunSpec
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
            captured.clear()
            if batch is not None:
                mask = batch.completion_mask
                advantages = torch.tensor([ADVANTAGES[i] for i in mine], device=trainer.device)[:, None] * mask
                trainer.update.optimise(batch, mask, advantages, None, None, None)
            else:
                trainer.update.optimise.join_without_data()
            out[f"{mode}/{split}"] = dict(captured)
    out["export"] = {name: t.clone() for name, t in export_weights(trainer.model)}  # every process gathers
    torch.save(out, Path(out_dir) / f"grads-world{world}-rank{rank}.pt")
    trainer.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
