import pytest
import torch

from tests.trainers.helpers import save_the_old_way, step_parts, stepped, tiny_spec
from trainers.report import MemoryReporter, failure_reported
from trainers.run import loop
from trainers.run.checkpoint import (
    STATE_FILE,
    CheckpointError,
    CheckpointSchedule,
    list_checkpoints,
    resolve_resume,
    save_checkpoint,
)
from trainers.run.loop import train
from trainers.scale.distributed import dist_info

# Wall-clock measurements differ between any two runs; everything else must not.
NONDETERMINISTIC = ("timing/", "perf/")


def comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(NONDETERMINISTIC)}


@pytest.mark.parametrize("engine", ["transformers", "vllm"])
def test_an_interrupted_then_resumed_run_equals_the_uninterrupted_run(tiny_model_path, tmp_path, engine, request):
    # With vLLM: the resumed engine loads the checkpoint's weights and continues its per-prompt seeds.
    rollout = {"engine": engine}
    if engine == "vllm":
        request.getfixturevalue("vllm_here")
        rollout |= {"vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1}
    overrides = {"optim": {"total_steps": 4, "seed": 7}, "checkpoint": {"every_n_steps": 2}, "rollout": rollout}
    whole = MemoryReporter()
    train(tiny_spec(tiny_model_path, tmp_path / "whole", **overrides), whole)

    interrupted = MemoryReporter()
    first = tiny_spec(tiny_model_path, tmp_path / "split", **overrides)
    assert train(first, interrupted, should_stop=lambda: len(interrupted.metric_points) == 2).status == "cancelled"
    resumed = MemoryReporter()
    second = tiny_spec(tiny_model_path, tmp_path / "split", **overrides)
    second.checkpoint.resume_from = "latest"
    assert train(second, resumed).steps == 4

    assert [s for s, _ in resumed.metric_points] == [3, 4]
    for (step, expected), (_, got) in zip(whole.metric_points[2:], resumed.metric_points, strict=True):
        expected, got = comparable(expected), comparable(got)
        assert got.keys() == expected.keys()
        for key in expected:
            assert got[key] == pytest.approx(expected[key], abs=1e-6), f"step {step} {key}"
    completions = [[r.completion for r in batch] for _, batch in whole.rollout_batches[2:]]
    assert [[r.completion for r in batch] for _, batch in resumed.rollout_batches] == completions
    assert any("resumed from" in line for line in resumed.lines)


def test_only_the_newest_checkpoints_are_kept(tiny_model_path, tmp_path):
    spec = tiny_spec(
        tiny_model_path, tmp_path, optim={"total_steps": 3}, checkpoint={"every_n_steps": 1, "keep_last": 2}
    )
    saved = []
    with step_parts(spec) as parts:  # the checkpoints of a run's three steps (the last one its final)
        for step in (1, 2, 3):
            parts.step_count = step
            saved.append(save_checkpoint(parts).name)
    assert saved == ["step-1", "step-2", "step-3"]
    kept = list_checkpoints(spec.checkpoint.output_dir)
    assert [p.name for p in kept] == ["step-2", "step-3"]
    assert (kept[-1] / STATE_FILE).exists() and (kept[-1] / "model.safetensors").exists()
    assert (kept[-1] / "tokenizer.json").exists()


@pytest.mark.parametrize(("minutes", "due"), [(1e-9, [1, 2, 3]), (60.0, [])])
def test_checkpoints_are_also_taken_every_n_minutes(tiny_model_path, tmp_path, minutes, due):
    # 1e-9 minutes: due after every step; an hour: never within this run (its final checkpoint is fit's, as
    # test_loop's first test checks).
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 3},
                     checkpoint={"every_n_steps": 0, "every_n_minutes": minutes, "keep_last": 5})  # fmt: skip
    schedule = CheckpointSchedule(spec.checkpoint, dist_info(), torch.device("cpu"))
    found = []
    for step in (1, 2, 3):
        if schedule.due(step):
            found.append(step)
            schedule.saved()
    assert found == due


def test_resuming_without_a_checkpoint_says_where_it_looked(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path)
    spec.checkpoint.resume_from = "latest"
    with pytest.raises(CheckpointError, match=r"resume_from='latest' but .*checkpoints holds no checkpoint"):
        resolve_resume(spec.checkpoint)
    spec.checkpoint.resume_from = str(tmp_path)
    with pytest.raises(CheckpointError, match="is not a checkpoint folder"):
        train(spec, MemoryReporter())


def test_a_lora_run_checkpoints_its_adapters_and_resumes(tiny_model_path, tmp_path):
    lora = {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    spec = tiny_spec(tiny_model_path, tmp_path, model={"lora": lora}, algorithm={"group_size": 4, "kl_beta": 0.1})
    stepped(spec, MemoryReporter(), update=True, save=True)  # three steps that train the adapters, the final save
    final = list_checkpoints(spec.checkpoint.output_dir)[-1]
    assert (final / "adapter_config.json").exists() and not (final / "model.safetensors").exists()
    spec.optim.total_steps = 4
    spec.checkpoint.resume_from = "latest"
    resumed = MemoryReporter()
    stepped(spec, resumed, update=True)
    assert [s for s, _ in resumed.metric_points] == [4]
    # The resumed adapters were loaded: fresh ones (lora_B = 0) would leave the policy equal to the
    # reference and the KL exactly 0 (k3 is never negative, so only > 0 says something).
    assert resumed.metric_points[0][1]["actor/kl"] > 0


def test_a_checkpoint_from_before_sharding_still_resumes_the_same_run(tiny_model_path, tmp_path, monkeypatch):
    overrides = {"optim": {"total_steps": 3, "seed": 3}, "checkpoint": {"every_n_steps": 2}}
    whole = MemoryReporter()
    train(tiny_spec(tiny_model_path, tmp_path / "whole", **overrides), whole)

    with monkeypatch.context() as patched:
        patched.setattr(loop, "save_checkpoint", save_the_old_way)
        interrupted = MemoryReporter()
        first = tiny_spec(tiny_model_path, tmp_path / "old", **overrides)
        train(first, interrupted, should_stop=lambda: len(interrupted.metric_points) == 2)
    old = list_checkpoints(first.checkpoint.output_dir)[-1]
    assert old.name == "step-2" and not (old / "dcp").exists()
    resumed = MemoryReporter()
    second = tiny_spec(tiny_model_path, tmp_path / "old", **overrides)
    second.checkpoint.resume_from = str(old)
    assert train(second, resumed).steps == 3

    expected, got = comparable(whole.metric_points[2][1]), comparable(resumed.metric_points[0][1])
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == pytest.approx(expected[key], abs=1e-6), key
    assert [r.completion for r in resumed.rollout_batches[0][1]] == [r.completion for r in whole.rollout_batches[2][1]]


def test_a_checkpoint_that_cannot_be_written_leaves_the_last_one_whole_and_says_why(
    tiny_model_path, tmp_path, monkeypatch
):
    """A full disk, as torch's distributed checkpoint reports it: a CheckpointException (a BaseException whose
    text says nothing of space). The run fails saying which checkpoint failed, the space left and which one is
    kept; the half-written folder is gone and the kept checkpoint still resumes."""
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.utils import _wrap_exception

    from trainers.run import checkpoint

    writes = []
    save_shards = checkpoint.save_shards

    def fills_the_disk(model, optimizer, folder):
        writes.append(folder.parent.name)
        if len(writes) == 2:  # step 2's: part of it written, then no space
            (folder / "partial").parent.mkdir(parents=True, exist_ok=True)
            (folder / "partial").write_bytes(b"\0" * 1024)
            try:
                raise OSError(28, "No space left on device")
            except OSError as exc:  # wrapped as torch's writers wrap what a rank raised
                raise CheckpointException("write failed", {0: _wrap_exception(exc)}) from None
        return save_shards(model, optimizer, folder)

    monkeypatch.setattr(checkpoint, "save_shards", fills_the_disk)
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 3}, checkpoint={"every_n_steps": 1})
    reporter = MemoryReporter()
    with (
        pytest.raises(checkpoint.CheckpointWriteError) as failed,
        failure_reported(reporter),
        step_parts(spec) as parts,
    ):
        for step in (1, 2):  # the checkpoints of steps 1 and 2, as a run saves and reports them
            parts.step_count = step
            parts.last_checkpoint = str(save_checkpoint(parts))
    root = tmp_path / "out" / "checkpoints"
    message = str(failed.value)
    assert message.startswith(f"could not write checkpoint step-2 in {root} (")
    assert "MiB free there): OSError: [Errno 28] No space left on device; " in message
    assert message.endswith(f"the newest complete checkpoint, {root / 'step-1'}, is kept")
    assert reporter.states[-1] == ("failed", message)
    assert sorted(p.name for p in root.iterdir()) == ["step-1"]  # no step-2.tmp left behind
    monkeypatch.setattr(checkpoint, "save_shards", save_shards)
    resumed = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 3},
                        checkpoint={"every_n_steps": 1, "resume_from": "latest"})  # fmt: skip
    steps = MemoryReporter()
    stepped(resumed, steps)  # from step-1 on to the end
    assert [s for s, _ in steps.metric_points] == [2, 3]
