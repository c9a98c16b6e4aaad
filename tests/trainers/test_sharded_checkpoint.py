"""Sharded checkpoints (trainers.scale.sharded_state, trainers.run.checkpoint) of an FSDP2 model: saved by
2 gloo processes, resumed by 1 and by 3 (DCP reshards), exported as a transformers folder, and
loaded as a model by `load_policy`. The processes run tests/trainers/distributed_checkpoint_worker.py."""

import subprocess
from pathlib import Path

import pytest
import torch
from torch.distributed.checkpoint import FileSystemReader
from transformers import AutoModelForCausalLM

from trainers.models.loading import load_policy
from trainers.report import MemoryReporter
from trainers.run.checkpoint import STATE_FILE, derived_seed, list_checkpoints
from trainers.run.loop import train
from trainers.run.seeding import seed_everything
from trainers.scale.distributed import torchrun_command
from trainers.spec import model_folder_error

from .distributed_checkpoint_worker import SEQUENCES, gathered, new_run, next_draws, take_step
from .helpers import job_env, save_the_old_way, tiny_spec

ROOT = Path(__file__).resolve().parents[2]
WORKER = "tests.trainers.distributed_checkpoint_worker"
SEED = 7


def run_worker(nproc: int, *args: str) -> None:
    cmd = torchrun_command(list(args), nproc, module=WORKER)
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=150, env=job_env())
    assert result.returncode == 0, result.stderr[-3000:]


def outputs(folder: Path, mode: str, world: int) -> list[dict]:
    return [torch.load(folder / f"{mode}-world{world}-rank{r}.pt", weights_only=False) for r in range(world)]


@pytest.fixture(scope="module")
def saved(tiny_model_path, tmp_path_factory):
    """The 2-process run: its folder, spec and what each process wrote."""
    folder = tmp_path_factory.mktemp("sharded")
    spec = tiny_spec(tiny_model_path, folder, optim={"total_steps": 3, "seed": SEED}, checkpoint={"keep_last": 2})
    spec_path = folder / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    run_worker(2, "save", str(spec_path), str(folder))
    return folder, spec, outputs(folder, "save", 2)


def same_lists(value):
    """`value` with every tuple made a list."""
    if isinstance(value, dict):
        return {k: same_lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [same_lists(v) for v in value]
    return value


def assert_same_state(got: dict, expected: dict) -> None:
    """Full parameters and optimiser state bit for bit."""
    assert got["params"].keys() == expected["params"].keys()
    for name, tensor in expected["params"].items():
        assert torch.equal(got["params"][name], tensor), name
    # (an old checkpoint's betas tuple comes back a list from torch's state-dict conversion: the same values)
    assert same_lists(got["optim"]["param_groups"]) == same_lists(expected["optim"]["param_groups"])
    assert got["optim"]["state"].keys() == expected["optim"]["state"].keys()
    for name, values in expected["optim"]["state"].items():
        for key, value in values.items():  # step, exp_avg, exp_avg_sq
            assert torch.equal(got["optim"]["state"][name][key], value), f"{name} {key}"


@pytest.mark.timeout(240)
def test_the_checkpoint_holds_each_processes_shards_and_state(saved):
    folder, spec, ranks = saved
    first, second = list_checkpoints(spec.checkpoint.output_dir)
    assert [first.name, second.name] == ["step-1", "step-2"]
    assert not list(first.parent.glob("*.tmp"))
    for path in (first, second):
        assert sorted(p.name for p in (path / "dcp").iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
        assert sorted(p.name for p in (path / "ranks").iterdir()) == ["rank-0.pt", "rank-1.pt"]
        assert (path / "tokenizer.json").exists()
        assert torch.load(path / STATE_FILE, weights_only=False)["world_size"] == 2
    assert not (first / "config.json").exists()  # only the final checkpoint is exported
    assert (second / "config.json").exists() and (second / "model.safetensors").exists()
    assert ranks[0]["draws"] != ranks[1]["draws"]  # the processes' random streams differ


@pytest.mark.timeout(240)
@pytest.mark.parametrize("world", [1, 3])
def test_a_checkpoint_of_two_processes_resumes_on_another_number(saved, world):
    """Resumed at 1 or 3 processes: the full parameters and optimiser state (gathered) are the saved
    ones exactly; the next step equals the uninterrupted 2-process run's third step within 1e-6
    (every process computes the whole fixed batch's loss, so the gradient is the same at any
    process count; only the rounding of FSDP's average over processes differs). Process r < 2
    continues its own random stream and engine state; process 2 had no counterpart, so it seeds
    from (seed, step, rank) and takes rank 0's engine state."""
    folder, spec, before = saved
    run_worker(world, "resume", str(folder / "spec.json"), str(folder), before[0]["path2"])
    after = outputs(folder, "resume", world)

    assert_same_state(after[0]["resumed"], before[0]["saved"])
    worst = 0.0
    for name, tensor in before[0]["next"]["params"].items():
        torch.testing.assert_close(after[0]["next"]["params"][name], tensor, atol=1e-6, rtol=0)
        worst = max(worst, (after[0]["next"]["params"][name] - tensor).abs().max().item())
    print(f"\nworld {world}: largest |resumed - uninterrupted| weight after the next step: {worst:.1e}")
    for r, out in enumerate(after):
        assert (out["step"], out["counters"], out["lr"]) == (2, (2, 2), before[0]["lr"])
        if r < 2:
            assert out["draws"] == before[r]["draws"]
            assert out["engine"] == before[r]["engine"]
        else:
            seed_everything(derived_seed(SEED, 2, r))
            assert out["draws"] == next_draws()
            assert out["engine"] == before[0]["engine"]


@pytest.mark.timeout(240)
def test_the_final_checkpoint_loads_as_a_transformers_model(saved):
    """The exported folder gives the logits the sharded model gave, and `load_policy` reads it."""
    folder, spec, ranks = saved
    model = AutoModelForCausalLM.from_pretrained(ranks[0]["path2"])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(SEQUENCES)).logits
    torch.testing.assert_close(logits, ranks[0]["logits"], atol=1e-6, rtol=1e-6)
    policy, _ = load_policy(spec.model, torch.device("cpu"), checkpoint=ranks[0]["path2"])
    for name, tensor in policy.state_dict().items():
        assert torch.equal(tensor, ranks[0]["saved"]["params"][name]), name


@pytest.mark.timeout(240)
def test_vllm_serves_the_final_checkpoint_as_transformers_reads_it(vllm_here, saved):
    """vLLM (its CPU build here) loads the exported folder as any model folder: its greedy tokens are
    transformers' greedy tokens from the same folder."""
    from trainers.rollout.engines.base import SamplingParams
    from trainers.rollout.engines.vllm_engine import ColocatedVLLM, build_llm

    folder, spec, ranks = saved
    export = ranks[0]["path2"]
    served = spec.model_copy(deep=True)
    served.model.path = str(export)
    served.rollout.engine, served.rollout.vllm_enforce_eager, served.rollout.vllm_gpu_memory_utilization = (
        "vllm",
        True,
        0.1,
    )
    engine = ColocatedVLLM(build_llm(served), sleep_between_generations=False)
    prompt = SEQUENCES[0]
    try:
        [[generation]] = engine.generate([prompt], 1, SamplingParams(max_new_tokens=8, temperature=0), seed=0)
    finally:
        engine.close()
    model = AutoModelForCausalLM.from_pretrained(export)
    expected = model.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False)[0, len(prompt) :]
    assert list(generation.token_ids) == expected.tolist()


@pytest.mark.timeout(240)
def test_a_checkpoint_without_an_export_loads_as_a_model_from_its_shards(saved):
    """An intermediate checkpoint (shards only) loads through `load_policy` in one process."""
    folder, spec, ranks = saved
    policy, tokenizer = load_policy(spec.model, torch.device("cpu"), checkpoint=ranks[0]["path1"])
    for name, tensor in policy.state_dict().items():
        assert torch.equal(tensor, ranks[0]["step1"]["params"][name]), name
    assert tokenizer.pad_token_id is not None
    assert model_folder_error(ranks[0]["path1"], adapters_ok=True) is None  # what the studio checks first
    assert model_folder_error(ranks[0]["path1"]) is not None  # not a model folder by itself


@pytest.mark.timeout(240)
def test_a_training_run_on_two_processes_resumes_on_one(tiny_model_path, tmp_path):
    """`train()` under torchrun (the model sharded over 2 processes) checkpoints through every
    process; a one-process run (not sharded) resumes from it and continues."""
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 2, "prompts_per_step": 2, "lr": 1e-3},
                     parallel={"procs_per_node": 2})  # fmt: skip
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    cmd = torchrun_command([str(spec_path), str(tmp_path)], 2, module="tests.trainers.distributed_train_worker")
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=170, env=job_env())
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = list_checkpoints(spec.checkpoint.output_dir)
    assert sorted(p.name for p in (path / "ranks").iterdir()) == ["rank-0.pt", "rank-1.pt"]
    exported = AutoModelForCausalLM.from_pretrained(str(path)).state_dict()  # the final checkpoint is exported
    trained = torch.load(tmp_path / "weights0.pt")["weights"]  # gathered from the shards at the end
    for name, tensor in exported.items():
        assert torch.equal(tensor, trained[name]), name

    spec.optim.total_steps = 3
    spec.parallel.procs_per_node = 1
    spec.checkpoint.resume_from = "latest"
    reporter = MemoryReporter()
    assert train(spec, reporter).steps == 3
    assert [step for step, _ in reporter.metric_points] == [3]
    assert any(f"resumed from {path} at step 2" in line for line in reporter.lines)


@pytest.mark.timeout(240)
def test_a_checkpoint_from_before_sharding_resumes_on_two_sharded_processes(tiny_model_path, tmp_path):
    """An old checkpoint (one process: save_pretrained weights, the optimiser state by parameter
    number) resumes into a model sharded over 2 processes: weights and optimiser state exactly, the
    next step as the one-process run takes it (within 1e-6); rank 0 continues the saved random
    stream, rank 1 (which the old run did not have) derives its own."""
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 3, "seed": SEED})
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    alone = new_run(spec, shard=False)
    for _ in range(2):
        take_step(alone)
    old = save_the_old_way(alone)
    before = gathered(alone)
    draws = next_draws()
    take_step(alone)

    run_worker(2, "resume", str(spec_path), str(tmp_path), str(old))
    after = outputs(tmp_path, "resume", 2)
    assert_same_state(after[0]["resumed"], before)
    for name, tensor in gathered(alone)["params"].items():
        torch.testing.assert_close(after[0]["next"]["params"][name], tensor, atol=1e-6, rtol=0)
    assert after[0]["draws"] == draws
    seed_everything(derived_seed(SEED, 2, 1))
    assert after[1]["draws"] == next_draws()
    assert after[0]["engine"] == after[1]["engine"] == {"n": 2}


@pytest.mark.timeout(240)
def test_a_lora_runs_shards_and_export_hold_its_adapters_alone(tiny_model_path, tmp_path):
    """LoRA on 2 sharded processes: the shards hold the adapters and their optimiser state only (the
    frozen base comes from model.path again), the final checkpoint exports the adapters as peft
    does, and both checkpoints load through `load_policy` with the trained adapters."""
    lora = {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    spec = tiny_spec(tiny_model_path, tmp_path, model={"lora": lora}, optim={"total_steps": 3, "seed": SEED},
                     checkpoint={"keep_last": 2})  # fmt: skip
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    run_worker(2, "save", str(spec_path), str(tmp_path))
    ranks = outputs(tmp_path, "save", 2)
    first, second = Path(ranks[0]["path1"]), Path(ranks[0]["path2"])

    saved = FileSystemReader(str(second / "dcp")).read_metadata().state_dict_metadata  # "model.<name>", ...
    tensors = [name for name in saved if name.startswith(("model.", "optimizer.state."))]
    assert tensors and all(".lora_" in name for name in tensors)
    assert not (first / "adapter_config.json").exists()
    assert (second / "adapter_config.json").exists() and not (second / "model.safetensors").exists()
    for path, point in ((first, "step1"), (second, "saved")):
        policy, _ = load_policy(spec.model, torch.device("cpu"), checkpoint=path)
        expected = ranks[0][point]["params"]
        assert any(".lora_B." in name and tensor.abs().max() > 0 for name, tensor in expected.items())  # trained
        for name, tensor in policy.state_dict().items():
            assert torch.equal(tensor, expected[name]), f"{path.name} {name}"
