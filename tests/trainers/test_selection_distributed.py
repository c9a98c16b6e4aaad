"""Forking tokens, KL-Cov, Clip-Cov and the guidance term under several processes: the gradient
equals one process's on the same batch (the selections' thresholds, means and random keys are
those of the whole batch, trainers.update.selection), with the rows sharded and with every row on
rank 0 (the other process joining the collectives without data)."""

import pytest
import torch

from .distributed_selection_worker import CASES
from .test_distributed import alone, assert_same_as_alone, exact_loss_spec, torchrun, write_spec


@pytest.mark.timeout(240)
def test_step_level_selections_and_guidance_give_the_one_process_gradient(tiny_model_path, tmp_path):
    spec = exact_loss_spec(tiny_model_path, tmp_path / "alone")
    alone(
        "tests.trainers.distributed_selection_worker",
        [str(write_spec(spec, tmp_path / "alone")), str(tmp_path / "alone")],
        110,
    )
    reference = torch.load(tmp_path / "alone" / "grads-world1-rank0.pt")
    sharded = exact_loss_spec(tiny_model_path, tmp_path / "two", parallel={"procs_per_node": 2, "sharding": "full"})
    torchrun(
        "tests.trainers.distributed_selection_worker",
        [str(write_spec(sharded, tmp_path / "two")), str(tmp_path / "two")],
        2,
        110,
    )
    ranks = [torch.load(tmp_path / "two" / f"grads-world2-rank{r}.pt") for r in range(2)]
    grads = [{k: v for k, v in rank.items() if not k.startswith("metrics/")} for rank in ranks]
    splits = ("shard", "filtered")
    assert set(grads[0]) == {f"{case}/{split}" for case in CASES for split in splits} | {
        f"logprobs/{s}" for s in splits
    }
    worst = assert_same_as_alone(grads, {k: v for k, v in reference.items() if not k.startswith("metrics/")})
    print(f"\nlargest |2-process - 1-process| gradient entry (relative above 1): {worst:.1e}")
    # The selections picked something, the same share whether alone or split (one process's view of it).
    alone_metrics = reference["metrics/forking+kl_cov+guidance/shard"]
    assert 0 < alone_metrics["actor/forking_frac"] < 1
    assert alone_metrics["actor/cov_selected_frac"] > 0
    assert 0 < alone_metrics["guidance/loss_share"] < 1
    assert reference["metrics/clip_cov/shard"]["actor/cov_selected_frac"] > 0
