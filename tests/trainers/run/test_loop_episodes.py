"""A step on multi-turn episodes: the tiny model in the test environment (tests/trainers/episode_envs), the
step's parts built alone (collection, the policy update, the step's metrics and rollouts); one run on vLLM
end to end."""

import math

import pytest

from tests.trainers import episode_envs  # noqa: F401  (registers the "test-echo" kind)
from tests.trainers.helpers import step_parts, tiny_spec
from trainers.report import MemoryReporter
from trainers.run.loop import train

EPISODE_KEYS = {
    "episode/turns_mean", "episode/tool_calls_mean", "episode/tool_calls/echo", "episode/tool_error_rate",
    "episode/well_formed_call_rate", "episode/answered_frac", "episode/observation_tokens_mean",
    "episode/ended_at_limit_frac", "timing/tool_s",
}  # fmt: skip


def multi_turn_spec(tiny_model_path, tmp_path, rollout=None, **environment):
    env = {"kind": "test-echo", "params": {"turns": 2, "reward": 0.25}, "max_turns": 3, "max_turn_tokens": 6,
           "max_episode_tokens": 64, **environment}  # fmt: skip
    return tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 2}, environment=env, rollout=rollout or {})


def first_step(spec):
    """Step 1 of `spec` on its parts alone: its metrics and its rollouts (advantages set by the update)."""
    with step_parts(spec, update=True) as parts:
        found, metrics = parts.step()
        return metrics, parts.rollouts(found.generated, found.kept, step=1)


def test_a_multi_turn_run_reports_turns_in_its_rollouts_and_episode_metrics(tiny_model_path, tmp_path):
    metrics, rollouts = first_step(multi_turn_spec(tiny_model_path, tmp_path))
    assert set(metrics) >= EPISODE_KEYS and all(math.isfinite(v) for v in metrics.values())
    assert metrics["episode/turns_mean"] == 2.0 and metrics["episode/tool_calls/echo"] == 1.0
    assert metrics["episode/answered_frac"] == 1.0 and metrics["episode/ended_at_limit_frac"] == 0.0
    assert len(rollouts) == 2 * 4
    for r in rollouts:
        assert r.end_reason == "done" and [t["reward"] for t in r.turns] == [0.25, 0.25]
        assert r.turns[0]["observation"] == [{"role": "tool", "content": "result 7"}]
        assert r.turns[0]["observation_tokens"] > 0 and r.turns[1]["observation_tokens"] == 0
        assert r.completion == r.turns[-1]["text"]
        # The reported reward is the rubric's plus the turn rewards.
        assert r.reward == pytest.approx(sum(s.score for s in r.scores.values()) + 0.5)
    assert sum(r.reward for r in rollouts) / len(rollouts) == pytest.approx(metrics["reward/mean"])
    # Each turn's advantage is the mean over its tokens; a trajectory-level estimator gives
    # every sampled token of an episode the same value.
    for r in rollouts:
        assert all(t["advantage"] == pytest.approx(r.advantage, abs=1e-5) for t in r.turns)


def test_an_environment_that_fails_leaves_the_run_going_with_the_episodes_annotated(tiny_model_path, tmp_path):
    metrics, rollouts = first_step(multi_turn_spec(tiny_model_path, tmp_path, params={"fail_on": "step"}))
    assert all(r.end_reason == "error" and "step failed on purpose" in r.error for r in rollouts)
    assert metrics["episode/error_frac"] == 1.0


def test_information_gain_and_turn_level_credit_reach_the_reported_turns(tiny_model_path, tmp_path):
    # mt_grpo with IGPO's information gain on: the demo rows carry an "answer" field, so turn 0 (not
    # the last turn) gains weight x IG on top of the environment's 0.25; the last turn keeps 0.25.
    env = {"kind": "test-echo", "params": {"turns": 2, "reward": 0.25}, "max_turns": 3, "max_turn_tokens": 6,
           "max_episode_tokens": 64}  # fmt: skip
    algorithm = {"advantage_estimator": "mt_grpo", "info_gain_weight": 5.0}
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1}, environment=env, algorithm=algorithm)
    metrics, rollouts = first_step(spec)
    assert "reward/info_gain_mean" in metrics
    for r in rollouts:
        assert r.turns[1]["reward"] == 0.25 and "info gain" not in r.turns[1]["reason"]
        assert r.turns[0]["reward"] != 0.25 and "info gain" in r.turns[0]["reason"]
    # Turn-level credit: the two turns of an episode get different advantages (trajectory-level would not).
    assert any(abs(r.turns[0]["advantage"] - r.turns[1]["advantage"]) > 1e-4 for r in rollouts)


def test_igpo_through_the_loop_normalises_each_groups_gains_and_outcomes_apart(tiny_model_path, tmp_path):
    # igpo, gamma 0: each turn's advantage is its own normalised reward. Recomputed from what the run
    # reports: turn 0's reward (0.25 + 5 x information gain) among its group's turn-0 rewards, and the
    # answer turn's (the episode's reward minus turn 0's) among its group's, population std + 1e-6.
    env = {"kind": "test-echo", "params": {"turns": 2, "reward": 0.25}, "max_turns": 3, "max_turn_tokens": 6,
           "max_episode_tokens": 64}  # fmt: skip
    algorithm = {"advantage_estimator": "igpo", "info_gain_weight": 5.0, "gamma": 0.0, "igpo_norm": "separate"}
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1}, environment=env, algorithm=algorithm)
    groups: dict[str, list] = {}
    for r in first_step(spec)[1]:
        groups.setdefault(r.prompt_id, []).append(r)

    def normalised(values: list[float]) -> list[float]:
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        return [(v - mean) / (std + 1e-6) for v in values]

    for rollouts in groups.values():
        gains = normalised([r.turns[0]["reward"] for r in rollouts])
        answers = normalised([r.reward - r.turns[0]["reward"] for r in rollouts])
        for r, gain, answer in zip(rollouts, gains, answers, strict=True):
            assert r.turns[0]["advantage"] == pytest.approx(gain, abs=1e-4)
            assert r.turns[1]["advantage"] == pytest.approx(answer, abs=1e-4)
    assert any(abs(r.turns[0]["advantage"]) > 0.1 for rs in groups.values() for r in rs)  # not all zeros


def test_a_multi_turn_run_on_vllm_trains_with_a_small_sampler_gap_on_sampled_tokens(
    tiny_model_path, tmp_path, vllm_here
):
    vllm = {"engine": "vllm", "vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1}
    spec = multi_turn_spec(tiny_model_path, tmp_path, rollout=vllm)
    reporter = MemoryReporter()
    assert train(spec, reporter).status == "succeeded"
    assert reporter.metric_points[1][1]["episode/turns_mean"] == 2.0
    # Engine logprobs line up with the sampled tokens of every turn (observations are not compared).
    assert 0 < reporter.series("rollout/logprob_gap_mean")[-1] < 1e-4
