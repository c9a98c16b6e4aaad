import json
import subprocess
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.distributed import DistInfo, dist_info, shard, torchrun_command, without_nproc

from .distributed_worker import LR, SEQUENCES, sequence_loss
from .helpers import tiny_spec

ROOT = Path(__file__).resolve().parents[2]


def test_a_process_without_torchrun_variables_is_a_single_process():
    info = dist_info({})
    assert (info.rank, info.world_size, info.is_main, info.enabled) == (0, 1, True, False)


def test_torchrun_variables_place_the_process():
    info = dist_info({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
    assert (info.rank, info.local_rank, info.world_size, info.is_main) == (3, 1, 4, False)


def test_shards_split_a_batch_without_overlap():
    items = list(range(7))
    shards = [shard(items, DistInfo(rank=r, world_size=3)) for r in range(3)]
    assert shards == [[0, 3, 6], [1, 4], [2, 5]]


def test_the_launcher_reruns_the_cli_under_torchrun_without_nproc():
    cmd = torchrun_command(without_nproc(["run", "spec.yaml", "--nproc", "4", "--quiet"]), 4)
    assert cmd[1:] == [
        "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4", "-m", "trainers", "run", "spec.yaml", "--quiet",
    ]  # fmt: skip
    assert without_nproc(["run", "--nproc=2", "s.yaml"]) == ["run", "s.yaml"]


def test_nproc_must_be_positive():
    with pytest.raises(ValueError, match="--nproc"):
        torchrun_command(["run"], 0)


@pytest.mark.timeout(120)
def test_two_processes_take_the_same_step_as_one_process_on_the_whole_batch(tiny_model_path, tmp_path):
    """Two gloo processes (CPU), each on half the batch with averaged gradients, end with identical
    weights equal to one full-batch step: data parallelism changes nothing but the speed."""
    cmd = torchrun_command([str(tiny_model_path), str(tmp_path)], 2, module="tests.trainers.distributed_worker")
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for name, tensor in ranks[0]["end"].items():
        assert torch.equal(tensor, ranks[1]["end"][name]), name

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    model.load_state_dict(ranks[0]["start"])  # rank 0's perturbed weights, which were broadcast
    loss = (sequence_loss(model, SEQUENCES[0::2]) + sequence_loss(model, SEQUENCES[1::2])) / 2
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= LR * p.grad
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(ranks[0]["end"][name], tensor, atol=1e-6, rtol=1e-5)
    assert ranks[0]["metrics"]["rank"] == 0.5  # (0 + 1) / 2
    assert ranks[0]["metrics"]["loss"] == pytest.approx(loss.item(), rel=1e-5)


@pytest.mark.timeout(180)
def test_a_run_on_two_processes_keeps_their_weights_identical_and_reports_once(tiny_model_path, tmp_path):
    """`train()` under torchrun with 2 gloo processes: each generates for one of the two prompts
    of a step, gradients are averaged, the weights stay identical, and only rank 0 reports
    and writes the checkpoint."""
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 2, "prompts_per_step": 2, "lr": 1e-3})
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    cmd = torchrun_command([str(spec_path), str(tmp_path)], 2, module="tests.trainers.distributed_train_worker")
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=170)
    assert result.returncode == 0, result.stderr[-3000:]

    weights = [torch.load(tmp_path / f"weights{r}.pt") for r in range(2)]
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
    assert any(not torch.equal(weights[0][k], initial[k]) for k in initial)  # it trained
    for name, tensor in weights[0].items():
        assert torch.equal(tensor, weights[1][name]), name

    main, other = (json.loads((tmp_path / f"report{r}.json").read_text()) for r in range(2))
    assert [step for step, _ in main["metrics"]] == [1, 2]
    assert main["states"][-1][0] == "succeeded"
    assert [step for step, _ in main["checkpoints"]] == [2]
    assert other == {"metrics": [], "states": [], "checkpoints": []}


@pytest.mark.timeout(240)
def test_two_processes_compute_the_one_process_loss_gradient_with_unequal_lengths_and_a_filtered_rank(
    tiny_model_path, tmp_path
):
    """The trainer's pass on 5 completions of 1 to 8 tokens (micro-batches of 2): split over two
    gloo processes, or all on one with the other's groups all filtered out, the gradient equals
    one process's on the whole batch, for token-mean, seq-mean-token-mean and token-sum (a mean
    of per-process means, or a process adding zero, would not)."""
    import sys

    spec = tiny_spec(tiny_model_path, tmp_path, optim={"micro_batch_size": 2, "max_grad_norm": None})
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    args = [str(spec_path), str(tmp_path)]
    alone = subprocess.run([sys.executable, "-m", "tests.trainers.distributed_loss_worker", *args], cwd=ROOT,
                           capture_output=True, text=True, timeout=110)  # fmt: skip
    assert alone.returncode == 0, alone.stderr[-3000:]
    cmd = torchrun_command(args, 2, module="tests.trainers.distributed_loss_worker")
    pair = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert pair.returncode == 0, pair.stderr[-3000:]

    reference = torch.load(tmp_path / "grads-world1-rank0.pt")
    ranks = [torch.load(tmp_path / f"grads-world2-rank{r}.pt") for r in range(2)]
    worst = 0.0
    for case, grads in ranks[0].items():
        mode = case.split("/")[0]
        expected = reference[f"{mode}/shard"]  # alone, both splits are the whole batch
        for name, grad in grads.items():
            assert torch.equal(grad, ranks[1][case][name]), f"{case} {name}: the processes disagree"
            # float32 sums in another order: 1e-6 of the gradient's scale (absolute below 1)
            error = (grad - expected[name]).abs().max().item() / max(1.0, expected[name].abs().max().item())
            worst = max(worst, error)
            assert error < 1e-6, f"{case} {name}"
    assert any(g.abs().max() > 1e-3 for g in reference["token-mean/shard"].values())  # a real gradient
    print(f"\nlargest |2-process - 1-process| gradient entry (relative above 1): {worst:.1e}")
