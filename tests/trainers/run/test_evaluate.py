import re

import pytest

from tests.trainers.helpers import tiny_spec
from trainers.report import MemoryReporter
from trainers.run.evaluate import evaluate, pass_at_k, pass_ks


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # 1 - C(7,5)/C(10,5)
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # every pair holds a passing sample
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_pass_ks_are_powers_of_two_and_n():
    assert pass_ks(1) == [1]
    assert pass_ks(4) == [1, 2, 4]
    assert pass_ks(6) == [1, 2, 4, 6]


def always(score: bool) -> dict:
    """A rubric whose one criterion always (or never) matches, so pass@k is known in advance."""
    pattern = r"[\s\S]*" if score else r"(?!)"
    return {"criteria": [{"name": "any", "kind": "regex", "params": {"pattern": pattern}}], "pass_threshold": 1.0}


@pytest.mark.parametrize("passes", [True, False])
def test_it_samples_k_per_prompt_and_reports_pass_at_k(tiny_model_path, tmp_path, passes):
    spec = tiny_spec(tiny_model_path, tmp_path, rubric=always(passes), eval={"samples_per_prompt": 4, "num_prompts": 3})
    reporter = MemoryReporter()
    result = evaluate(spec, reporter)
    assert result.status == "succeeded" and result.num_prompts == 3
    rollouts = [r for _, batch in reporter.rollout_batches for r in batch]
    assert len(rollouts) == 12 and {r.sample_index for r in rollouts} == {0, 1, 2, 3}
    assert [r.prompt_id for r in rollouts[::4]] == ["1", "2", "3"]  # file order
    # Evaluation samples, filed apart from training rollouts (issue 40) and never trained on.
    assert {(r.split, r.trained) for r in rollouts} == {("eval", False)}
    expected = 1.0 if passes else 0.0
    assert result.metrics["eval/reward/mean"] == expected
    assert result.metrics["eval/reward/any/mean"] == expected
    assert {k: v for k, v in result.metrics.items() if re.fullmatch(r"eval/pass@\d+", k)} == {
        "eval/pass@1": expected,
        "eval/pass@2": expected,
        "eval/pass@4": expected,
    }
    assert reporter.metric_points == [(0, result.metrics)]
    assert reporter.states[-1][0] == "succeeded"


def test_pass_at_k_mixes_passing_and_failing_samples(tiny_model_path, tmp_path):
    # The letter rubric passes at 0.75: a random model's samples rarely do, the metric must agree with them.
    spec = tiny_spec(tiny_model_path, tmp_path, eval={"samples_per_prompt": 4})
    reporter = MemoryReporter()
    metrics = evaluate(spec, reporter).metrics
    rollouts = [r for _, batch in reporter.rollout_batches for r in batch]
    by_prompt = {}
    for r in rollouts:
        by_prompt.setdefault(r.prompt_id, []).append(r.reward >= 0.75)
    expected = sum(pass_at_k(4, sum(p), 2) for p in by_prompt.values()) / len(by_prompt)
    assert metrics["eval/pass@2"] == pytest.approx(expected)


def test_without_a_threshold_there_is_no_pass_at_k(tiny_model_path, tmp_path):
    rubric = {**always(True), "pass_threshold": None}
    spec = tiny_spec(tiny_model_path, tmp_path, rubric=rubric, eval={"samples_per_prompt": 2})
    assert not any(k.startswith("eval/pass@") for k in evaluate(spec, MemoryReporter()).metrics)


def test_should_stop_cancels_between_batches(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, eval={"samples_per_prompt": 2}, rollout={"generation_batch_size": 2})
    reporter = MemoryReporter()
    result = evaluate(spec, reporter, should_stop=lambda: len(reporter.rollout_batches) >= 1)
    assert result.status == "cancelled" and result.num_prompts == 1
    assert reporter.states[-1][0] == "cancelled"


def test_it_evaluates_a_checkpoint(tiny_model_path, tmp_path):
    from trainers.run.loop import train

    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1})
    spec.eval.checkpoint = train(spec, MemoryReporter()).checkpoint
    reporter = MemoryReporter()
    assert evaluate(spec, reporter).status == "succeeded"
    assert "step-1" in reporter.states[0][1]


def test_an_evaluation_with_vllm_scores_k_samples_per_prompt(tiny_model_path, tmp_path, vllm_here):
    vllm = {"engine": "vllm", "vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1}
    spec = tiny_spec(tiny_model_path, tmp_path, rubric=always(True), rollout=vllm,
                     eval={"samples_per_prompt": 4, "num_prompts": 3})  # fmt: skip
    reporter = MemoryReporter()
    result = evaluate(spec, reporter)
    assert result.status == "succeeded" and result.metrics["eval/pass@4"] == 1.0
    rollouts = [r for _, batch in reporter.rollout_batches for r in batch]
    assert len(rollouts) == 12 and all(1 <= r.num_tokens <= 6 for r in rollouts)


def test_an_evaluation_that_fails_midway_still_closes_its_engine(tiny_model_path, tmp_path, monkeypatch):
    from trainers.rollout.engines.hf import HFEngine

    closed = []
    monkeypatch.setattr(HFEngine, "close", lambda self: closed.append(self), raising=False)

    class FailingReporter(MemoryReporter):
        def rollouts(self, step, rollouts):
            raise OSError("the database went away")

    with pytest.raises(OSError, match="the database went away"):
        evaluate(tiny_spec(tiny_model_path, tmp_path, eval={"samples_per_prompt": 2}), FailingReporter())
    assert len(closed) == 1


def test_it_evaluates_multi_turn_episodes_with_their_turns(tiny_model_path, tmp_path):
    from tests.trainers import episode_envs  # noqa: F401  (registers the "test-echo" kind)

    environment = {"kind": "test-echo", "params": {"turns": 2, "reward": 0.25}, "max_turn_tokens": 6}
    spec = tiny_spec(
        tiny_model_path, tmp_path, rubric=always(True), eval={"samples_per_prompt": 2, "num_prompts": 2},
        environment=environment,
    )  # fmt: skip
    reporter = MemoryReporter()
    result = evaluate(spec, reporter)
    rollouts = [r for _, batch in reporter.rollout_batches for r in batch]
    assert len(rollouts) == 4 and all(r.end_reason == "done" and len(r.turns) == 2 for r in rollouts)
    assert all(r.completion == r.turns[-1]["text"] for r in rollouts)
    assert result.metrics["eval/reward/mean"] == pytest.approx(1.0 + 2 * 0.25)  # rubric + turn rewards
    assert result.metrics["eval/pass@1"] == 1.0
