"""One rank of the data-parallel check in test_distributed.py (run under torchrun): perturbs its
model differently from the other ranks, syncs from rank 0, shards it with FSDP2 as `sharding`
says (hybrid: 2 nodes x world/2), takes one SGD step on its shard of a fixed batch (FSDP averages
the gradients over the mesh), and saves the gathered parameters and metrics."""

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from trainers.scale.distributed import broadcast_parameters, cleanup, init_distributed, mean_over_processes, shard
from trainers.scale.sharding import build_mesh, full_tensor, run_pass, shard_model
from trainers.spec import ParallelSpec

SEQUENCES = [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [20, 21, 22, 23, 24], [30, 31, 32, 33, 34]]
LR = 0.5


def sequence_loss(model, rows):
    ids = torch.tensor(rows)
    return model(input_ids=ids, labels=ids).loss  # mean over the shard's tokens (equal lengths)


def parallel_spec(sharding: str, world: int) -> ParallelSpec:
    if sharding == "hybrid":
        return ParallelSpec(procs_per_node=world // 2, nodes=2, sharding="hybrid")
    return ParallelSpec(procs_per_node=world, sharding=sharding)


def main(model_path: str, out_dir: str, sharding: str) -> None:
    info = init_distributed()
    parallel = parallel_spec(sharding, info.world_size)
    mesh = build_mesh(parallel, info)
    torch.manual_seed(100 + info.rank)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)  # differs per rank until broadcast
    broadcast_parameters(model, info)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    shard_model(model, mesh, parallel)
    assert all(type(p).__name__ == "DTensor" for p in model.parameters())
    loss = run_pass(model, lambda: sequence_loss(model, shard(SEQUENCES, info)))
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= LR * p.grad
    end = {name: full_tensor(t).clone() for name, t in model.state_dict().items()}  # every rank, in order
    metrics = mean_over_processes({"loss": loss.item(), "rank": float(info.rank)}, info)
    torch.save({"start": start, "end": end, "metrics": metrics}, Path(out_dir) / f"rank{info.rank}.pt")
    cleanup(info)


if __name__ == "__main__":
    main(*sys.argv[1:4])
