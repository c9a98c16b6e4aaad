"""One process of the exact-loss check of the step-level objectives (test_selection_distributed.py),
under torchrun or alone for the reference: the trainer's optimisation pass on a fixed batch with
forking tokens + KL-Cov + guidance, then with Clip-Cov, its selections made over every process
(trainers.update.selection). Saves the gradient each pass steps with and the selection's metrics.

The batch's rows carry their index in the whole batch as row id (Clip-Cov's random keys), and the
old logprobs are the current ones less a fixed offset per row and column, so KL-Cov's |log ratio|
has a gradient; both depend on the row, never on the process holding it."""

import sys
from pathlib import Path

import torch

from trainers.report import MemoryReporter
from trainers.run.loop import Trainer
from trainers.scale.sharding import full_tensor
from trainers.spec import RunSpec
from trainers.update.batches import TokenBatch
from trainers.update.policy_update import PolicyUpdate

from .distributed_loss_worker import ADVANTAGES, COMPLETIONS, PROMPT, rows_of

SOLUTIONS = [[30, 31, 32], [33, 34], [35, 36, 37, 38, 39]]
CASES = {
    "forking+kl_cov+guidance": {
        "policy_loss": "kl_cov", "kl_cov_ratio": 0.2, "kl_cov_coef": 0.5, "entropy_top_ratio": 0.4,
        "guidance_coef": 0.5, "guidance_shaping": 0.1,
    },
    "clip_cov": {"policy_loss": "clip_cov", "clip_cov_ratio": 0.3, "clip_cov_lb": -100.0, "clip_cov_ub": 100.0},
}  # fmt: skip


def main(spec_path: str, out_dir: str) -> None:
    spec = RunSpec.model_validate_json(Path(spec_path).read_text())
    trainer = Trainer(spec, MemoryReporter())
    rank, world = trainer.dist.rank, trainer.dist.world_size
    captured: dict[str, torch.Tensor] = {}

    def capture() -> None:
        captured.update(
            {n: full_tensor(p.grad).clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        )

    trainer.optimizer.step = capture
    out = {}
    for case, values in CASES.items():
        algo = trainer.spec.algorithm.model_copy(update={"loss_agg_mode": "token-mean", **values})
        case_spec = trainer.spec.model_copy(update={"algorithm": algo})
        update = PolicyUpdate(case_spec, trainer.model, None, trainer.optimizer, dist=trainer.dist,
                              lockstep=trainer.lockstep)  # fmt: skip
        pad_id = trainer.lockstep.pad_id
        for split in ("shard", "filtered"):
            mine = rows_of(split, rank, world)
            guide = [i for i in range(len(SOLUTIONS)) if i in mine] if algo.guidance_coef > 0 else []
            batch = guidance = None
            if mine:
                batch = TokenBatch.build([PROMPT] * len(mine), [COMPLETIONS[i] for i in mine],
                                         pad_id=pad_id, device=trainer.device)  # fmt: skip
            if guide:
                guidance = TokenBatch.build([PROMPT] * len(guide), [SOLUTIONS[i] for i in guide],
                                            pad_id=pad_id, device=trainer.device)  # fmt: skip
            logp, old_entropy = update.frozen(trainer.model, batch, True)
            if logp is not None:
                out.setdefault(
                    f"logprobs/{split}", {i: logp[k, : len(COMPLETIONS[i])].clone() for k, i in enumerate(mine)}
                )
            else:
                out.setdefault(f"logprobs/{split}", {})
            captured.clear()
            if batch is not None:
                mask = batch.completion_mask
                advantages = torch.tensor([ADVANTAGES[i] for i in mine], device=trainer.device)[:, None] * mask
                rows = torch.tensor(mine, dtype=torch.float32, device=trainer.device)[:, None]
                columns = torch.arange(mask.shape[1], device=trainer.device, dtype=torch.float32)[None]
                old_logp = logp - 0.01 * (rows + 1) * (columns - 2)  # a fixed log-ratio per row and column
                selected = update.select(batch, mask, advantages, 0, 0, old_logp, old_entropy, torch.tensor(mine))
                metrics = update.optimise(
                    batch, mask, advantages, old_logp, None, None, selected=selected, guidance=guidance
                )
                out[f"metrics/{case}/{split}"] = metrics | selected.metrics
            else:
                update.select(None, None, None, 0, 0)
                update.optimise.join_without_data()
            out[f"{case}/{split}"] = dict(captured)
    torch.save(out, Path(out_dir) / f"grads-world{world}-rank{rank}.pt")
    trainer.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
