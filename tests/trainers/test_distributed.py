import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.scale.distributed import DistInfo, dist_info, shard, torchrun_command

from .distributed_loss_worker import COMPLETIONS, MODES
from .distributed_worker import LR, SEQUENCES, sequence_loss
from .helpers import job_env, tiny_spec

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


def test_the_launcher_reruns_the_cli_under_torchrun_with_the_same_arguments():
    # The children see WORLD_SIZE and run; an override reaches them as it reached the parent.
    cmd = torchrun_command(["run", "spec.yaml", "--procs-per-node", "4", "--quiet"], 4, options=["--tee", "3"])
    assert cmd[1:] == [
        "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4", "--tee", "3",
        "-m", "trainers", "run", "spec.yaml", "--procs-per-node", "4", "--quiet",
    ]  # fmt: skip


def test_a_process_past_the_last_visible_gpu_is_refused_in_words(monkeypatch):
    """On a machine with one GPU, the job's second process: a clear refusal before CUDA is asked for a device that
    is not there. The GPU count is patched (this machine has none); a GPU machine's run checks the same."""
    from trainers.scale.distributed import init_distributed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match="process 1 on this machine needs a GPU of its own and 1 are visible"):
        init_distributed(DistInfo(rank=1, local_rank=1, world_size=2))


def test_processes_per_node_must_be_positive():
    with pytest.raises(ValueError, match="processes per node"):
        torchrun_command(["run"], 0)


def torchrun(module: str, args: list[str], nproc: int, timeout: int) -> None:
    result = subprocess.run(torchrun_command(args, nproc, module=module), cwd=ROOT, capture_output=True, text=True,
                            timeout=timeout, env=job_env())  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


def alone(module: str, args: list[str], timeout: int) -> None:
    result = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=timeout, env=job_env())  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("sharding", "nproc"), [("full", 2), ("replicate", 2), ("hybrid", 4)])
def test_sharded_processes_take_the_same_step_as_one_process_on_the_whole_batch(
    tiny_model_path, tmp_path, sharding, nproc
):
    """Gloo processes (CPU) holding the model sharded by FSDP2 (hybrid: 4 processes as 2 nodes x 2),
    each on its share of the batch: the gathered weights after one SGD step are identical on every
    process and equal to one process's step on the mean of the shares' losses."""
    torchrun("tests.trainers.distributed_worker", [str(tiny_model_path), str(tmp_path), sharding], nproc, 110)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(nproc)]
    for other in ranks[1:]:
        for name, tensor in ranks[0]["end"].items():
            assert torch.equal(tensor, other["end"][name]), name

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    model.load_state_dict(ranks[0]["start"])  # rank 0's perturbed weights, which were broadcast
    loss = sum(sequence_loss(model, SEQUENCES[r::nproc]) for r in range(nproc)) / nproc
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= LR * p.grad
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(ranks[0]["end"][name], tensor, atol=1e-6, rtol=1e-5)
    assert ranks[0]["metrics"]["rank"] == (nproc - 1) / 2
    assert ranks[0]["metrics"]["loss"] == pytest.approx(loss.item(), rel=1e-5)


@pytest.mark.timeout(180)
def test_a_run_on_two_processes_keeps_their_weights_identical_and_reports_once(tiny_model_path, tmp_path):
    """`train()` under torchrun with 2 gloo processes, the policy and the reference (KL) sharded:
    each generates for one of the two prompts of a step from its whole copy of the policy, the
    gathered weights stay identical (and equal to each copy), and only rank 0 reports."""
    spec = tiny_spec(
        tiny_model_path, tmp_path, optim={"total_steps": 2, "prompts_per_step": 2, "lr": 1e-3},
        algorithm={"kl_beta": 0.05}, parallel={"procs_per_node": 2},
    )  # fmt: skip
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    torchrun("tests.trainers.distributed_train_worker", [str(spec_path), str(tmp_path)], 2, 170)

    saved = [torch.load(tmp_path / f"weights{r}.pt") for r in range(2)]
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
    weights = saved[0]["weights"]
    assert weights.keys() == initial.keys()
    assert any(not torch.equal(weights[k], initial[k]) for k in initial)  # it trained
    for name, tensor in weights.items():
        assert torch.equal(tensor, saved[1]["weights"][name]), name
        for r in range(2):  # the engine samples from the weights being trained
            assert torch.equal(tensor, saved[r]["sampling_copy"][name]), f"rank {r}'s copy: {name}"

    main, other = (json.loads((tmp_path / f"report{r}.json").read_text()) for r in range(2))
    assert [step for step, _ in main["metrics"]] == [1, 2]
    assert main["states"][-1][0] == "succeeded"
    assert [step for step, _ in main["checkpoints"]] == [2]
    # Rank 0 reports every process's rollouts: both prompts' groups, each group under its own name.
    group_size = spec.algorithm.group_size
    for step, rollouts in main["rollouts"]:
        assert len(rollouts) == 2 * group_size, step
        assert len({prompt_id for prompt_id, _ in rollouts}) == 2, step
        assert len({tuple(r) for r in rollouts}) == 2 * group_size, step
    assert [step for step, _ in main["rollouts"]] == [1, 2]
    assert other == {"metrics": [], "states": [], "checkpoints": [], "rollouts": []}


@pytest.mark.timeout(240)
def test_colocated_vllm_on_two_sharded_processes_samples_the_updated_policy(vllm_here, tiny_model_path, tmp_path):
    """Each process's own vLLM (the CPU build here) receives the policy gathered from the shards
    after every update: the step after an update samples with logprobs equal to the trainer's."""
    spec = tiny_spec(
        tiny_model_path, tmp_path, optim={"total_steps": 2, "prompts_per_step": 2, "lr": 1e-2},
        rollout={"engine": "vllm"}, parallel={"procs_per_node": 2},
    )  # fmt: skip
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    torchrun("tests.trainers.distributed_train_worker", [str(spec_path), str(tmp_path)], 2, 230)

    saved = [torch.load(tmp_path / f"weights{r}.pt") for r in range(2)]
    assert saved[0]["sampling_copy"] is None  # vLLM holds its own copy
    for name, tensor in saved[0]["weights"].items():
        assert torch.equal(tensor, saved[1]["weights"][name]), name
    (_, first), (_, second) = json.loads((tmp_path / "report0.json").read_text())["metrics"]
    assert first["actor/grad_norm"] > 0  # the first step moved the weights (lr 1e-2: a stale vLLM would show)
    assert second["rollout/logprob_gap_mean"] < 1e-4


def exact_loss_spec(tiny_model_path, tmp_path, **overrides):
    optim = {"micro_batch_size": 2, "max_grad_norm": None, **overrides.pop("optim", {})}
    return tiny_spec(tiny_model_path, tmp_path, optim=optim, **overrides)


def write_spec(spec, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.json"
    path.write_text(spec.model_dump_json())
    return path


@pytest.fixture(scope="module")
def alone_grads(tiny_model_path, tmp_path_factory):
    """The loss worker's results in one process (the reference the sharded runs must equal)."""
    tmp_path = tmp_path_factory.mktemp("alone")
    path = write_spec(exact_loss_spec(tiny_model_path, tmp_path), tmp_path)
    alone("tests.trainers.distributed_loss_worker", [str(path), str(tmp_path)], 110)
    return torch.load(tmp_path / "grads-world1-rank0.pt")


def assert_same_as_alone(ranks: list[dict], reference: dict, tolerance: float = 1e-5) -> float:
    """Every case's gradient, every row's no-grad logprobs and the exported weights: equal on
    every process and to the single process's. Returns the largest difference seen."""
    worst = 0.0
    for case, grads in ranks[0].items():
        if case.startswith("logprobs/"):
            continue
        mode = "token-mean" if case.startswith("every-pass/") else case.split("/")[0]
        expected = reference["export" if case == "export" else f"{mode}/shard"]  # alone: whole batch
        assert grads.keys() == expected.keys(), case
        for name, grad in grads.items():
            for other in ranks[1:]:
                assert torch.equal(grad, other[case][name]), f"{case} {name}: the processes disagree"
            # float32 sums in another order: relative to the gradient's scale above 1, absolute below
            error = (grad - expected[name]).abs().max().item() / max(1.0, expected[name].abs().max().item())
            worst = max(worst, error)
            assert error < tolerance, f"{case} {name}: {error}"
    for split in ("shard", "filtered"):
        rows = {i: logp for rank in ranks for i, logp in rank[f"logprobs/{split}"].items()}
        assert sorted(rows) == list(range(len(COMPLETIONS)))
        for i, logp in rows.items():
            torch.testing.assert_close(logp, reference["logprobs/shard"][i], atol=tolerance, rtol=0)
    return worst


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("parallel", "nproc"),
    [
        ({"procs_per_node": 2, "sharding": "full"}, 2),
        ({"procs_per_node": 2, "sharding": "replicate", "activation_checkpointing": True}, 2),
        ({"procs_per_node": 2, "nodes": 2, "sharding": "hybrid"}, 4),
    ],
    ids=["full", "replicate-checkpointed", "hybrid-2x2"],
)
def test_sharded_processes_compute_the_one_process_loss_gradient_with_unequal_lengths_and_a_filtered_rank(
    tiny_model_path, tmp_path, alone_grads, parallel, nproc
):
    """The trainer's pass on 5 completions of 1 to 8 tokens (micro-batches of 2, so the processes
    have different numbers of them), split over processes sharding the model with FSDP2, or all on
    rank 0 with the others' groups all filtered out: the gradient (gathered whole) equals one
    process's on the whole batch, for token-mean, seq-mean-token-mean and token-sum (a mean of
    per-process means, or a process adding zero, would not), and so do the no-grad logprobs."""
    spec = exact_loss_spec(tiny_model_path, tmp_path, parallel=parallel)
    path = write_spec(spec, tmp_path)
    torchrun("tests.trainers.distributed_loss_worker", [str(path), str(tmp_path)], nproc, 110)
    ranks = [torch.load(tmp_path / f"grads-world{nproc}-rank{r}.pt") for r in range(nproc)]
    assert set(ranks[0]) == {f"{m}/{s}" for m in MODES for s in ("shard", "filtered")} | {
        "logprobs/shard", "logprobs/filtered", "export", "every-pass/filtered",
    }  # fmt: skip
    worst = assert_same_as_alone(ranks, alone_grads)
    assert any(g.abs().max() > 1e-3 for g in alone_grads["token-mean/shard"].values())  # a real gradient
    print(f"\nlargest |sharded - 1-process| gradient entry (relative above 1): {worst:.1e}")
    assert_one_reduction_per_step(tmp_path, nproc, parallel["sharding"], ranks)


def assert_one_reduction_per_step(folder: Path, nproc: int, sharding: str, ranks: list[dict]) -> None:
    """The filtered split's pass (3 micro-batches on rank 0, 3 idle passes on the others), its FSDP
    collectives counted: replicate all-reduces each unit's gradient once per step (3 times when every
    backward reduces, as before), hybrid reduce-scatters within the node on every backward and all-reduces
    across nodes once, full reduce-scatters on every backward; and the gradient equals the one reduced
    after every backward to 1e-6."""
    for r in range(nproc):
        counts = json.loads((folder / f"reductions-world{nproc}-rank{r}.json").read_text())
        once, every = counts["once"], counts["every"]
        units, passes = once["units"], once["passes"]
        assert passes == every["passes"] == 3, counts
        all_reduces = {"replicate": units, "hybrid": units, "full": 0}[sharding]
        scatters = {"replicate": 0, "hybrid": units * passes, "full": units * passes}[sharding]
        assert (once.get("all_reduce", 0), once.get("reduce_scatter_single", 0)) == (all_reduces, scatters), counts
        every_all_reduces = units * passes if sharding != "full" else 0
        assert (every.get("all_reduce", 0), every.get("reduce_scatter_single", 0)) == (every_all_reduces, scatters)
    once, every = ranks[0]["token-mean/filtered"], ranks[0]["every-pass/filtered"]
    assert once.keys() == every.keys()
    for name, grad in once.items():
        torch.testing.assert_close(grad, every[name], atol=1e-6, rtol=0, msg=name)


@pytest.mark.timeout(180)
def test_lora_adapters_train_on_a_sharded_frozen_base_as_in_one_process(tiny_model_path, tmp_path):
    """LoRA under FSDP2 (2 processes, full sharding): the frozen base has no gradient, the adapters'
    gradients equal one process's (after a reference pass with the adapters off, which peft does by
    turning their requires_grad off and on), and the exported weights (adapters merged from the
    gathered shards) equal peft's own merge in one process."""
    lora, kl = {"lora": {"r": 4, "alpha": 8}}, {"kl_beta": 0.05}  # the reference: the policy, adapters off
    path = write_spec(
        exact_loss_spec(tiny_model_path, tmp_path / "alone", model=lora, algorithm=kl), tmp_path / "alone"
    )
    alone("tests.trainers.distributed_loss_worker", [str(path), str(tmp_path / "alone")], 110)
    reference = torch.load(tmp_path / "alone" / "grads-world1-rank0.pt")
    sharded = tmp_path / "sharded"
    spec = exact_loss_spec(tiny_model_path, sharded, model=lora, algorithm=kl, parallel={"procs_per_node": 2})
    torchrun("tests.trainers.distributed_loss_worker", [str(write_spec(spec, sharded)), str(sharded)], 2, 110)
    ranks = [torch.load(sharded / f"grads-world2-rank{r}.pt") for r in range(2)]

    grads = ranks[0]["token-mean/shard"]
    assert grads and all("lora_" in name for name in grads)  # the adapters, and nothing else
    assert all(g.abs().max() > 0 for g in grads.values())  # A and B both learn (B is not zero)
    assert_same_as_alone(ranks, reference)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
    assert ranks[0]["export"].keys() == base.keys()
    assert not torch.equal(ranks[0]["export"]["model.layers.0.self_attn.q_proj.weight"],
                           base["model.layers.0.self_attn.q_proj.weight"])  # fmt: skip


def relative_gap(ranks: list[dict], reference: dict, case: str) -> float:
    """|sharded - alone| / |alone| over the whole gradient of `case`, after checking the processes agree."""
    grads = ranks[0][case]
    for other in ranks[1:]:
        assert all(torch.equal(g, other[case][n]) for n, g in grads.items()), "the processes disagree"
    expected = reference[f"{case.split('/')[0]}/shard"]
    assert grads.keys() == expected.keys()
    gap = torch.cat([(g - expected[n]).flatten() for n, g in grads.items()]).norm()
    return (gap / torch.cat([g.flatten() for g in expected.values()]).norm()).item()


@pytest.mark.timeout(120)
def test_bf16_mixed_precision_keeps_the_gradient_to_bf16_accuracy(tiny_model_path, tmp_path, alone_grads):
    """parallel.mixed_precision bf16 (FSDP2 gathers and computes in bfloat16, reduces in float32;
    gloo carries bfloat16 on the CPU too): the same gradient as float32 alone, to bf16's accuracy."""
    spec = exact_loss_spec(tiny_model_path, tmp_path, parallel={"procs_per_node": 2, "mixed_precision": "bf16"})
    torchrun("tests.trainers.distributed_loss_worker", [str(write_spec(spec, tmp_path)), str(tmp_path)], 2, 110)
    ranks = [torch.load(tmp_path / f"grads-world2-rank{r}.pt") for r in range(2)]
    for case in ("token-mean/shard", "token-mean/filtered"):
        assert 0 < relative_gap(ranks, alone_grads, case) < 0.05, case


@pytest.mark.timeout(180)
@pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="CPU offload is for GPU runs (NCCL on 2 GPUs, gloo for the CPU shards)"
)
def test_cpu_offload_with_bf16_on_two_gpus_keeps_the_gradient(tiny_model_path, tmp_path, alone_grads):
    """The GPU-only settings together: shards, gradients and optimiser state in CPU memory between
    uses, bf16 passes. The alone reference ran on a GPU too (float32)."""
    parallel = {"procs_per_node": 2, "mixed_precision": "bf16", "cpu_offload": True}
    spec = exact_loss_spec(tiny_model_path, tmp_path, parallel=parallel)
    torchrun("tests.trainers.distributed_loss_worker", [str(write_spec(spec, tmp_path)), str(tmp_path)], 2, 170)
    ranks = [torch.load(tmp_path / f"grads-world2-rank{r}.pt", map_location="cpu") for r in range(2)]
    for case in ("token-mean/shard", "token-mean/filtered"):
        assert relative_gap(ranks, alone_grads, case) < 0.05, case
