"""One rank of the 2-process data-parallel check in test_distributed.py (run under torchrun):
perturbs its model differently from the other rank, syncs from rank 0, takes one SGD step on
its shard of a fixed batch with averaged gradients, and saves its parameters and metrics."""

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from trainers.distributed import (
    average_gradients,
    broadcast_parameters,
    cleanup,
    init_distributed,
    mean_over_processes,
    shard,
)

SEQUENCES = [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [20, 21, 22, 23, 24], [30, 31, 32, 33, 34]]
LR = 0.5


def sequence_loss(model, rows):
    ids = torch.tensor(rows)
    return model(input_ids=ids, labels=ids).loss  # mean over the shard's tokens (equal lengths)


def main(model_path: str, out_dir: str) -> None:
    info = init_distributed()
    torch.manual_seed(100 + info.rank)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)  # differs per rank until broadcast
    broadcast_parameters(model, info)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    loss = sequence_loss(model, shard(SEQUENCES, info))
    loss.backward()
    average_gradients(model.parameters(), info)
    with torch.no_grad():
        for p in model.parameters():
            p -= LR * p.grad
    metrics = mean_over_processes({"loss": loss.item(), "rank": float(info.rank)}, info)
    torch.save({"start": start, "end": model.state_dict(), "metrics": metrics}, Path(out_dir) / f"rank{info.rank}.pt")
    cleanup(info)


if __name__ == "__main__":
    main(*sys.argv[1:3])
