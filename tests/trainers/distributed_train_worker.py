"""One rank of the 2-process `train()` check in test_distributed.py (run under torchrun):
trains the tiny model for a few steps and saves what it reported and its final weights (gathered
whole from the shards, on every rank)."""

import json
import os
import sys
from pathlib import Path

import torch

import trainers.run.loop as loop
from trainers.report import MemoryReporter
from trainers.rollout.engines.vllm_weights import export_weights
from trainers.spec import RunSpec


def main(spec_path: str, out_dir: str) -> None:
    rank = int(os.environ["RANK"])
    spec = RunSpec.model_validate_json(Path(spec_path).read_text())
    reporter = MemoryReporter()
    original_close = loop.Trainer.close

    def keep_weights(self):  # save this rank's weights just before the run tears down
        weights = {name: t.clone() for name, t in export_weights(self.model)}  # gathered by every rank
        copy = self.sampler.copy.state_dict() if self.sampler.copy is not None else None
        torch.save({"weights": weights, "sampling_copy": copy}, Path(out_dir) / f"weights{rank}.pt")
        original_close(self)

    loop.Trainer.close = keep_weights
    loop.train(spec, reporter)
    report = {
        "metrics": reporter.metric_points, "states": reporter.states, "checkpoints": reporter.checkpoints,
        "rollouts": [(step, [(r.prompt_id, r.sample_index) for r in batch]) for step, batch in reporter.rollout_batches],
    }  # fmt: skip
    (Path(out_dir) / f"report{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:3])
