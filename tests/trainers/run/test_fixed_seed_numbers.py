"""The trainer's numbers on a fixed seed are the ones recorded before the loop was split into parts
(`fixed_seed_numbers.json`, written by this file with RECORD_FIXED_SEED=1 from the code as it was): three
steps of the tiny demo, synchronous and asynchronous, and one synchronous run with the stages that are
off by default turned on (a reference with a KL term, two passes, dynamic sampling, an off-policy
correction, token selection, guidance). Every metric but the clocks is compared with ==, every parameter
bit for bit (a SHA-256 of each tensor's bytes, which is stricter than torch.equal and keeps the recorded
file at a few kB instead of the weights' 12 MB): a change of where code lives must not change what it
computes.

Recorded on this project's CPU machines; float results may differ on other hardware (a GPU), where the
test skips."""

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch

from tests.trainers.helpers import tiny_spec
from trainers.report import MemoryReporter
from trainers.run.loop import Trainer

RECORDED = Path(__file__).with_name("fixed_seed_numbers.json")
CLOCKS = ("timing/", "perf/")
# The step's token counts (issue 41's usage) came after the recording; tests/trainers/run/test_perf_metrics.py
# checks them against the step's own numbers.
LATER = ("tokens/",)

VARIANTS: dict[str, dict] = {
    "sync": {},
    "async": {"rollout": {"asynchronous": {"mode": "async", "max_staleness": 0}}},
    "sync_all_parts": {
        "algorithm": {
            "group_size": 4,
            "kl_beta": 0.05,
            "ppo_epochs": 2,
            "dynamic_sampling": True,
            "dynamic_sampling_max_rounds": 2,
            "policy_loss": "clip_cov",
            "clip_cov_ratio": 0.2,
            "correction": "tis",
            "guidance_coef": 0.1,
            "guidance_field": "answer",
        },
        "rollout": {"max_new_tokens": 6},
    },
}


def digest(tensor: torch.Tensor) -> str:
    """dtype, shape and a SHA-256 of the bytes: equal exactly when the tensors are equal bit for bit."""
    t = tensor.detach().cpu().contiguous()
    return f"{t.dtype} {list(t.shape)} {hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest()}"


def numbers(model_path: Path, tmp_path: Path, overrides: dict) -> dict:
    settings = {"optim": {"total_steps": 3, "seed": 11, "lr": 1e-3}, "checkpoint": {"save_final": False}}
    for section, values in overrides.items():
        settings[section] = {**settings.get(section, {}), **values}
    reporter = MemoryReporter()
    trainer = Trainer(tiny_spec(model_path, tmp_path, **settings), reporter)
    try:
        result = trainer.fit(lambda: False)
        weights = {name: digest(t) for name, t in trainer.model.state_dict().items()}
    finally:
        trainer.close()
    assert result.status == "succeeded" and result.steps == 3
    metrics = [
        [step, {k: v for k, v in m.items() if not k.startswith(CLOCKS + LATER)}] for step, m in reporter.metric_points
    ]
    rollouts = [[step, [[r.prompt_id, r.completion, r.reward, r.advantage] for r in batch]]
                for step, batch in reporter.rollout_batches]  # fmt: skip
    return {"metrics": metrics, "rollouts": rollouts, "weights": weights}


@pytest.mark.skipif(torch.cuda.is_available(), reason="recorded on the CPU; CUDA kernels give other floats")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_three_steps_on_a_fixed_seed_match_the_recorded_numbers(tiny_model_path, tmp_path, variant):
    got = numbers(tiny_model_path, tmp_path, VARIANTS[variant])
    if os.environ.get("RECORD_FIXED_SEED"):
        recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
        RECORDED.write_text(json.dumps({**recorded, variant: got}, indent=1, sort_keys=True) + "\n")
        pytest.skip("recorded")
    expected = json.loads(RECORDED.read_text())[variant]
    assert [step for step, _ in got["metrics"]] == [1, 2, 3]
    assert got["metrics"] == expected["metrics"]  # floats with ==: bit for bit
    assert got["rollouts"] == expected["rollouts"]
    assert got["weights"] == expected["weights"]
