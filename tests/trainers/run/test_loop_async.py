"""The training loop with asynchronous rollouts (rollout.asynchronous; trainers.run.pipeline): the
synchronous case stays exact, the staleness bound holds for every trained token, rollouts say which
versions sampled them, a run resumes, and colocated vLLM samples ahead of training."""

import threading

import pytest
import torch
from safetensors.torch import load_file

from tests.trainers.helpers import tiny_spec
from trainers.report import MemoryReporter
from trainers.rollout.engines.vllm_engine import VLLMEngine
from trainers.run import sampler
from trainers.run.loop import train

# Wall-clock measurements differ between any two runs; everything else must not.
NONDETERMINISTIC = ("timing/", "perf/")
ASYNC = {"mode": "async", "max_staleness": 1}
PARTIAL = {**ASYNC, "partial_rollouts": True, "segment_tokens": 2, "over_provision": 2.0}


def comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(NONDETERMINISTIC)}


def final_weights(result) -> dict[str, torch.Tensor]:
    return load_file(f"{result.checkpoint}/model.safetensors")


def test_async_with_max_staleness_0_is_the_synchronous_run_exactly(tiny_model_path, tmp_path):
    runs = {}
    for name, settings in (("sync", {"mode": "sync"}), ("async0", {"mode": "async", "max_staleness": 0})):
        reporter = MemoryReporter()
        spec = tiny_spec(tiny_model_path, tmp_path / name, optim={"total_steps": 2, "seed": 3},
                         rollout={"asynchronous": settings})  # fmt: skip
        runs[name] = (reporter, train(spec, reporter))
    (sync, sync_result), (async0, async_result) = runs["sync"], runs["async0"]
    assert [comparable(m) for _, m in async0.metric_points] == [comparable(m) for _, m in sync.metric_points]
    assert not any(key.startswith("async/") for _, m in async0.metric_points for key in m)

    def samples(reporter: MemoryReporter) -> list[list[tuple]]:
        return [[(r.completion, r.reward, r.advantage) for r in batch] for _, batch in reporter.rollout_batches]

    assert samples(async0) == samples(sync)
    expected, got = final_weights(sync_result), final_weights(async_result)
    assert all(torch.equal(got[name], expected[name]) for name in expected)
    # Synchronous rollouts are sampled by the weights their step trains from: staleness 0.
    assert {r.staleness for _, batch in sync.rollout_batches for r in batch} == {0}


@pytest.mark.parametrize("settings", [ASYNC, PARTIAL], ids=["async", "async+partial"])
def test_no_trained_token_is_older_than_max_staleness(tiny_model_path, tmp_path, settings):
    reporter = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 4}, rollout={"asynchronous": settings},
                     algorithm={"group_size": 4, "correction": "decoupled"})  # fmt: skip
    assert train(spec, reporter).status == "succeeded"
    trained = [r for _, batch in reporter.rollout_batches for r in batch if r.trained]
    assert len(trained) == 4 * 2 * 4
    assert all(0 <= r.staleness <= 1 for r in trained)
    # Each rollout's version runs cover its sampled tokens, in order, none newer than the step's weights.
    for step, batch in reporter.rollout_batches:
        for r in batch:
            assert sum(n for _, n in r.policy_versions) == r.num_tokens
            assert all(v <= step - 1 for v, _ in r.policy_versions)
    for step, m in reporter.metric_points:
        assert m["async/staleness_max"] <= 1 and m["async/staleness_0"] + m["async/staleness_1"] == 8
        tokens = sum(r.num_tokens for r in trained if r.step == step)
        assert m["async/tokens_lag_0"] + m["async/tokens_lag_1"] == tokens
        assert 0 <= m["async/engine_busy"] <= 1 and 0 <= m["async/trainer_busy"] <= 1
        assert {"correction/weight_mean", "async/queue_depth", "async/dropped_stale"} <= m.keys()


def test_an_asynchronous_run_resumes_from_its_checkpoint(tiny_model_path, tmp_path):
    # The queue is not saved: the resumed run regenerates it from the resumed weights (version 2 on).
    overrides = {"rollout": {"asynchronous": PARTIAL}, "checkpoint": {"every_n_steps": 1}}
    first = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 4}, **overrides)
    assert train(spec, first, should_stop=lambda: len(first.metric_points) == 2).status == "cancelled"
    resumed = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 4}, **overrides)
    spec.checkpoint.resume_from = "latest"
    assert train(spec, resumed).steps == 4
    assert [s for s, _ in resumed.metric_points] == [3, 4]
    assert [m["async/policy_version"] for _, m in resumed.metric_points] == [2.0, 3.0]
    first_batch = resumed.rollout_batches[0][1]
    assert min(v for r in first_batch for v, _ in r.policy_versions) == 2


def test_asynchronous_rollouts_in_colocated_vllm_train_on_what_the_version_vllm_held_sampled(
    tiny_model_path, tmp_path, vllm_here, monkeypatch
):
    """vLLM holds its own weights: no transformers copy beside them, and each update goes into vLLM between
    the generator's requests (never at its next request, when the trainer is changing them again), so a
    token's version is that of the weights vLLM sampled it with, and its engine logprob its behaviour's."""
    copies, lazy_pushes = [], []
    monkeypatch.setattr(sampler, "full_copy", lambda model: copies.append(model) or model)
    generate = VLLMEngine.generate

    def generate_watched(self, *args):
        if threading.current_thread().name == "generator":
            lazy_pushes.append(self.pending_model is not None)
        return generate(self, *args)

    monkeypatch.setattr(VLLMEngine, "generate", generate_watched)
    vllm = {"engine": "vllm", "vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1, "asynchronous": ASYNC}
    reporter = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 3}, rollout=vllm,
                     algorithm={"group_size": 4, "correction": "decoupled"})  # fmt: skip
    assert train(spec, reporter).status == "succeeded"
    assert copies == [] and lazy_pushes and not any(lazy_pushes)
    trained = [r for _, batch in reporter.rollout_batches for r in batch if r.trained]
    assert len(trained) == 3 * 2 * 4 and all(0 <= r.staleness <= 1 for r in trained)
    for step, batch in reporter.rollout_batches:
        for r in batch:
            assert sum(n for _, n in r.policy_versions) == r.num_tokens
            assert all(v <= step - 1 for v, _ in r.policy_versions)
    for step, m in reporter.metric_points:
        assert m["async/staleness_max"] <= 1
        assert m["async/tokens_lag_0"] + m["async/tokens_lag_1"] == sum(r.num_tokens for r in trained if r.step == step)
    # Tokens trained by the version that sampled them (step 1's at least): the gap is vLLM's against the
    # trainer's forward alone, measured and small (float32 on both sides); older ones add the update's.
    on_version = [m for _, m in reporter.metric_points if m["async/tokens_lag_1"] == 0]
    assert on_version and all(0 < m["rollout/logprob_gap_mean"] < 1e-4 for m in on_version)
