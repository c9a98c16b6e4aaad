"""One process of the exact-loss check in test_distributed.py (under torchrun, or alone for the
reference): the trainer's optimisation pass on a fixed batch of unequal-length completions, for
each loss aggregation mode and each way of splitting the batch; saves the gradient each pass
steps with (the optimiser's step is replaced by a capture)."""

import sys
from pathlib import Path

import torch

from trainers.report import MemoryReporter
from trainers.run.loop import Trainer
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
    captured: dict[str, torch.Tensor] = {}

    def capture() -> None:
        captured.update({n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()})

    trainer.optimizer.step = capture
    out = {}
    for mode in MODES:
        trainer.spec.algorithm.loss_agg_mode = mode
        for split in ("shard", "filtered"):
            mine = rows_of(split, rank, world)
            captured.clear()
            if mine:
                batch = TokenBatch.build([PROMPT] * len(mine), [COMPLETIONS[i] for i in mine],
                                         pad_id=trainer.pad_id, device=trainer.device)  # fmt: skip
                mask = batch.completion_mask
                advantages = torch.tensor([ADVANTAGES[i] for i in mine])[:, None] * mask
                trainer._optimise(batch, mask, advantages, None, None, None)
            else:
                trainer._join_pass_without_data()
            out[f"{mode}/{split}"] = dict(captured)
    torch.save(out, Path(out_dir) / f"grads-world{world}-rank{rank}.pt")
    trainer.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
