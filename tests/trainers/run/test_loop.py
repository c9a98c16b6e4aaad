import math

import pytest

from tests.trainers.helpers import step_parts, tiny_spec
from trainers.report import MemoryReporter
from trainers.run.failure_watch import FailureWatch
from trainers.run.loop import train
from trainers.run.step_metrics import reward_metrics
from trainers.update.optimizer import advance_schedule, lr_lambda, make_optimizer, make_scheduler

STEP_KEYS = {
    "reward/mean", "reward/std", "reward/letter/mean", "reward/frac_zero_std_groups",
    "advantage/mean", "advantage/std", "advantage/min", "advantage/max",
    "actor/loss", "actor/entropy", "actor/clip_frac_low", "actor/clip_frac_high", "actor/ppo_kl",
    "actor/grad_norm", "actor/lr", "response/length_mean", "response/length_max", "response/truncated_frac",
    "timing/generate_s", "timing/score_s", "timing/train_s", "timing/step_s", "perf/tokens_per_s", "data/epoch",
}  # fmt: skip


def test_a_run_reports_status_metrics_rollouts_and_a_final_checkpoint(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    result = train(tiny_spec(tiny_model_path, tmp_path), reporter)
    assert result.status == "succeeded" and result.steps == 3
    assert reporter.states[0][0] == "running" and reporter.states[-1] == ("succeeded", "3 steps")
    assert [step for step, _ in reporter.metric_points] == [1, 2, 3]
    assert set(reporter.metric_points[0][1]) >= STEP_KEYS
    assert all(math.isfinite(v) for _, values in reporter.metric_points for v in values.values())
    step, rollouts = reporter.rollout_batches[0]
    assert step == 1 and len(rollouts) == 2 * 4
    assert {r.sample_index for r in rollouts} == {0, 1, 2, 3}
    assert all(r.finish_reason in ("stop", "length") and 1 <= r.num_tokens <= 6 for r in rollouts)
    assert all(set(r.scores) == {"letter"} for r in rollouts)
    assert reporter.checkpoints == [(3, str(tmp_path / "out" / "checkpoints" / "step-3"))]
    assert result.checkpoint == reporter.checkpoints[-1][1]


def test_rollout_rewards_and_advantages_agree_with_the_metrics(tiny_model_path, tmp_path):
    # The step's groups (collection), their advantages (the policy update), as rollouts and reward metrics.
    with step_parts(tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1}), update=True) as parts:
        found = parts.collector.collect(0)
        parts.update(found.kept, 0, None)
        rollouts = parts.rollouts(found.generated, found.kept, step=1)
        metrics = reward_metrics(found.generated, parts.rubric.names)
    rewards = [r.reward for r in rollouts]
    assert sum(rewards) / len(rewards) == pytest.approx(metrics["reward/mean"])
    for prompt_id in {r.prompt_id for r in rollouts}:
        group = [r for r in rollouts if r.prompt_id == prompt_id]
        if len({r.reward for r in group}) > 1:  # GRPO: advantages of a group are centred
            assert sum(r.advantage for r in group) == pytest.approx(0.0, abs=1e-5)
            best = max(group, key=lambda r: r.reward)
            assert best.advantage == max(r.advantage for r in group) > 0


def test_the_rubric_scores_the_completion_not_the_prompt(tiny_model_path, tmp_path):
    # The prompt "Repeat the letter: a" contains the letter: a rubric that saw it would give every
    # completion some credit for 'a'. Completions without the letter must score exactly 0.
    with step_parts(tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1})) as parts:
        found = parts.collector.collect(0)
        rollouts = parts.rollouts(found.generated, found.kept, step=1)
    for r in rollouts:
        letter = r.prompt[-1]
        if letter not in r.completion:
            assert r.reward == 0.0


def test_should_stop_ends_the_run_between_steps_with_a_checkpoint(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    result = train(tiny_spec(tiny_model_path, tmp_path), reporter, should_stop=lambda: len(reporter.metric_points) >= 1)
    assert result.status == "cancelled" and result.steps == 1
    assert reporter.states[-1] == ("cancelled", "stopped at step 1: the step-1 checkpoint is kept")
    assert [s for s, _ in reporter.checkpoints] == [1]


def test_kl_ppo_epochs_and_dapo_filters_run_together(tiny_model_path, tmp_path):
    spec = tiny_spec(
        tiny_model_path,
        tmp_path,
        algorithm={
            "group_size": 4, "kl_beta": 0.1, "kl_estimator": "k3", "ppo_epochs": 2, "dynamic_sampling": True,
            "dynamic_sampling_max_rounds": 2, "overlong_penalty": True, "overlong_buffer": 2, "overlong_filter": True,
            "entropy_coef": 0.01, "clip_ratio_high": 0.28, "dual_clip_c": 3.0,
        },
        optim={"total_steps": 2},
    )  # fmt: skip
    updates = []
    with step_parts(spec, update=True) as parts:  # two steps: collection and the update on what it kept
        for step in range(2):
            found = parts.collector.collect(step)
            assert found.rounds in (1, 2)
            updates.append(parts.update(found.kept, step, None) if found.kept else {})
            advance_schedule(parts.scheduler)
    for m in updates:
        # Every update reports its KL term (k3 is never negative, so its sign says nothing; the
        # overlong filter masks most of a random model's truncated completions, so it may be 0).
        assert ("actor/kl" in m) == ("actor/loss" in m)
    assert updates[1].get("actor/ppo_kl") is not None


def test_kl_in_the_reward_with_rloo(tiny_model_path, tmp_path):
    spec = tiny_spec(
        tiny_model_path,
        tmp_path,
        algorithm={
            "group_size": 4,
            "advantage_estimator": "rloo",
            "kl_beta": 0.05,
            "kl_estimator": "k1",
            "kl_in_reward": True,
        },
        optim={"total_steps": 2},
    )
    with step_parts(spec, update=True) as parts:  # two steps of collection and the update
        for step in range(2):
            found = parts.collector.collect(step)
            assert math.isfinite(parts.update(found.kept, step, None)["actor/loss"])
            advance_schedule(parts.scheduler)


def test_a_bad_dataset_fails_the_run_with_the_reason(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path)
    spec.data.prompt_field = "question"
    reporter = MemoryReporter()
    with pytest.raises(ValueError, match="field 'question' is missing"):
        train(spec, reporter)
    assert reporter.states[-1][0] == "failed"
    assert "field 'question' is missing" in reporter.states[-1][1]


def test_learning_rate_schedules_warm_up_then_decay():
    assert [lr_lambda("constant", 2, 10)(s) for s in (0, 1, 2, 9)] == pytest.approx([1 / 3, 2 / 3, 1, 1])
    assert lr_lambda("linear", 0, 10)(5) == pytest.approx(0.5)
    assert lr_lambda("cosine", 0, 10)(5) == pytest.approx(0.5)
    assert lr_lambda("cosine", 0, 10)(10) == pytest.approx(0.0)


ALWAYS_ONE = {"criteria": [{"name": "any", "kind": "regex", "params": {"pattern": r"[\s\S]*"}}]}


def test_dynamic_sampling_drops_groups_whose_rewards_agree(tiny_model_path, tmp_path):
    # Every completion scores 1: no group has a spread, so every round is dropped and nothing trains.
    spec = tiny_spec(
        tiny_model_path,
        tmp_path,
        rubric=ALWAYS_ONE,
        algorithm={"group_size": 4, "dynamic_sampling": True, "dynamic_sampling_max_rounds": 3},
        optim={"total_steps": 1},
    )
    reporter = MemoryReporter()
    train(spec, reporter)
    (_, metrics), (_, rollouts) = reporter.metric_points[0], reporter.rollout_batches[0]
    assert metrics["data/generation_rounds"] == 3 and metrics["data/groups_kept"] == 0
    assert metrics["reward/frac_zero_std_groups"] == 1.0
    assert "actor/loss" not in metrics
    assert len(rollouts) == 3 * 2 * 4  # every generated group is reported, with advantage 0
    assert all(r.advantage == 0.0 for r in rollouts)
    assert not any(r.trained for r in rollouts)  # and marked: none of them trained
    assert any("no update" in line for line in reporter.lines)


def test_dynamic_sampling_judges_groups_by_the_rubric_outcome_not_the_length_penalty(tiny_model_path, tmp_path):
    # Every completion scores 1; a stop string ends them at different lengths, so the soft overlong
    # penalty alone makes their rewards differ. Same outcome everywhere: every group is dropped.
    spec = tiny_spec(
        tiny_model_path,
        tmp_path,
        rubric=ALWAYS_ONE,
        rollout={"max_new_tokens": 8, "stop": [" "]},
        algorithm={
            "group_size": 4,
            "dynamic_sampling": True,
            "dynamic_sampling_max_rounds": 1,
            "overlong_penalty": True,
            "overlong_buffer": 7,
        },  # fmt: skip
        optim={"total_steps": 1, "prompts_per_step": 4},
    )
    with step_parts(spec) as parts:  # collection alone: nothing kept means no update (the test above)
        found = parts.collector.collect(0)
        rollouts = parts.rollouts(found.generated, found.kept, step=1)
        metrics = reward_metrics(found.generated, parts.rubric.names)
    shaped = {}
    for r in rollouts:
        shaped.setdefault(r.prompt_id, set()).add(r.reward)
    assert any(len(rewards) > 1 for rewards in shaped.values()), "the penalty should tell some samples apart"
    assert found.kept == []
    assert metrics["reward/frac_zero_std_groups"] == 1.0


@pytest.mark.parametrize(
    ("advantage_estimator", "policy_loss", "kl_estimator", "loss_agg_mode", "ppo_epochs"),
    [
        ("grpo", "gspo", "k2", "seq-mean-token-mean", 2),
        # vanilla_pg has no ratio (one pass only), k1 belongs in the reward: both refused otherwise
        ("dr_grpo", "vanilla_pg", "k1", "seq-mean-token-sum-norm", 1),
        ("reinforce_pp", "ppo_clip", "k3", "token-mean", 2),
        ("reinforce_pp_baseline", "gspo", "abs", "seq-mean-token-sum", 2),
        ("group_mean_batch_std", "ppo_clip", "k2", "token-sum", 2),
    ],
)
def test_every_registry_entry_trains(
    tiny_model_path, tmp_path, advantage_estimator, policy_loss, kl_estimator, loss_agg_mode, ppo_epochs
):
    algorithm = {
        "group_size": 4, "advantage_estimator": advantage_estimator, "policy_loss": policy_loss,
        "kl_estimator": kl_estimator, "loss_agg_mode": loss_agg_mode, "kl_beta": 0.05, "ppo_epochs": ppo_epochs,
        "kl_in_reward": kl_estimator == "k1",
    }  # fmt: skip
    spec = tiny_spec(tiny_model_path, tmp_path, algorithm=algorithm, optim={"total_steps": 1})
    with step_parts(spec, update=True) as parts:  # one step's groups through the policy update
        metrics = parts.update(parts.collector.collect(0).kept, 0, None)
    assert math.isfinite(metrics["actor/loss"])
    if ppo_epochs > 1:
        assert metrics["actor/ppo_kl"] != 0.0  # the second pass is off-policy


def test_a_prompt_drawn_twice_in_a_step_gives_two_distinct_groups(tiny_model_path, tmp_path):
    # One dataset row, two prompts per step: the same row is drawn twice, as two groups.
    spec = tiny_spec(tiny_model_path, tmp_path, data={"limit": 1}, optim={"total_steps": 1})
    with step_parts(spec) as parts:
        found = parts.collector.collect(0)
        rollouts = parts.rollouts(found.generated, found.kept, step=1)
    first, second = sorted({r.prompt_id for r in rollouts})
    assert second == f"{first}@2"
    assert len({(r.prompt_id, r.sample_index) for r in rollouts}) == len(rollouts) == 8


def _python_rubric(code: str, timeout_s: float = 1.0) -> dict:
    return {"criteria": [{"name": "user", "kind": "python", "params": {"code": code, "timeout_s": timeout_s}}]}


# The sandbox worker scores a step's samples in order, in one process, so a counter in the
# user's module numbers the calls: group k of a round holds calls 4k+1 .. 4k+4.
ALTERNATING_GROUPS = """
calls = [0]

def score(prompt, completion, **fields):
    calls[0] += 1
    n = calls[0]
    if ((n - 1) // 4) % 2 == 0:
        return float(n % 2)  # even groups: rewards 1 0 1 0, a spread
    return 1.0  # odd groups: rewards all agree
"""


def test_dynamic_sampling_tops_up_a_partly_filled_batch_from_the_next_round(tiny_model_path, tmp_path):
    # Round 1: group A has a spread, group B not -> 1 of 2 kept; round 2: group C kept -> full.
    spec = tiny_spec(
        tiny_model_path,
        tmp_path,
        rubric=_python_rubric(ALTERNATING_GROUPS),
        algorithm={"group_size": 4, "dynamic_sampling": True, "dynamic_sampling_max_rounds": 5},
        optim={"total_steps": 1, "prompts_per_step": 2},
    )
    with step_parts(spec, update=True) as parts:  # collection, then the update on the groups it kept
        found = parts.collector.collect(0)
        metrics = parts.update(found.kept, 0, None)
        rollouts = parts.rollouts(found.generated, found.kept, step=1)
    assert found.rounds == 2 and len(found.kept) == 2
    assert "actor/loss" in metrics
    # Rewards and advantages are those of the first round's groups, which are what the step reports
    # as its reward curve; the dropped group B trains on nothing (advantage 0).
    assert len(rollouts) == 2 * 2 * 4
    by_group = [rollouts[k * 4 : (k + 1) * 4] for k in range(4)]
    assert [[r.reward for r in g] for g in by_group] == [[1, 0, 1, 0], [1, 1, 1, 1], [1, 0, 1, 0], [1, 1, 1, 1]]
    assert all(r.advantage != 0 for g in (by_group[0], by_group[2]) for r in g)
    assert all(r.advantage == 0 for g in (by_group[1], by_group[3]) for r in g)
    assert [{r.trained for r in g} for g in by_group] == [{True}, {False}, {True}, {False}]


# Calls numbered per sandbox process: 1 scores, 2 raises, 3 allocates without bound, 4 hangs.
# The hang costs the process its life; its replacement numbers from 1 again.
MISBEHAVING = """
calls = [0]

def score(prompt, completion, **fields):
    calls[0] += 1
    n = calls[0]
    if n == 2:
        raise ValueError("cannot score this one")
    if n == 3:
        hog = bytearray(64 * 2**30)  # beyond the memory limit
    if n == 4:
        while True:
            pass
    return 1.0
"""


def test_a_python_criterion_that_raises_hangs_or_hogs_memory_leaves_the_run_going(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, rubric=_python_rubric(MISBEHAVING), optim={"total_steps": 2})
    batches, rewards = [], []
    with step_parts(spec) as parts:  # two steps' collection: the scoring is what misbehaves
        for step in range(2):
            found = parts.collector.collect(step)
            batches.append(parts.rollouts(found.generated, found.kept, step=step + 1))
            rewards.append(reward_metrics(found.generated, parts.rubric.names)["reward/mean"])
    assert len(batches) == 2
    for batch in batches:
        for k in range(0, len(batch), 4):
            good, raised, hog, hung = (r.scores["user"] for r in batch[k : k + 4])
            assert (good.score, good.error) == (1.0, None)
            assert raised.error.startswith("ValueError: cannot score this one"), raised.error
            assert hog.error.startswith("MemoryError"), hog.error
            assert hung.error.startswith("timed out after 1 s"), hung.error
            assert [r.reward for r in batch[k : k + 4]] == [1.0, 0.0, 0.0, 0.0]
    assert rewards == [0.25, 0.25]


def test_the_reported_learning_rate_is_the_one_the_step_used(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 2, "lr": 1e-3, "warmup_steps": 3})
    with step_parts(spec) as parts:  # the optimiser and its schedule, as a run makes them
        optimizer = make_optimizer(parts.model, spec.optim)
        scheduler = make_scheduler(optimizer, spec.optim)
        used, lrs = [], []
        for _ in range(2):
            used.append(optimizer.param_groups[0]["lr"])  # what the step's optimiser step uses
            lrs.append(advance_schedule(scheduler))  # what the step reports as actor/lr
    assert lrs == used == pytest.approx([1e-3 * 1 / 4, 1e-3 * 2 / 4])  # warm-up: (s + 1) / (warmup + 1)


def test_the_vllm_trainer_gap_read_off_the_training_forward_equals_a_separate_forward_pass(
    tiny_model_path, tmp_path, vllm_here
):
    """One pass, no TIS: the gap comes from the training forward (no extra pass). A TIS cap no
    sample reaches forces the separate no-grad pass; the same seed gives the same rollouts."""
    vllm = {"engine": "vllm", "vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1}
    gaps = {}
    for name, algorithm in (("training forward", {}), ("separate pass", {"tis_cap": 1e6})):
        reporter = MemoryReporter()
        train(tiny_spec(tiny_model_path, tmp_path / name.replace(" ", "-"), rollout=vllm, algorithm=algorithm,
                        optim={"total_steps": 1}), reporter)  # fmt: skip
        gaps[name] = (reporter.series("rollout/logprob_gap_mean")[0], reporter.series("rollout/logprob_gap_max")[0])
    assert gaps["training forward"] == pytest.approx(gaps["separate pass"], abs=1e-7)
    assert 0 < gaps["training forward"][0] < 1e-4  # measured, and small: float32 on both sides


# A criterion that fails on every rollout: the demo rows have no field 'missing'.
BROKEN = {"name": "broken", "kind": "exact_match", "weight": 1.0, "params": {"reference_field": "missing"}}


def broken_spec(tiny_model_path, tmp_path, **reward):
    from trainers.demos.demo import demo_rubric

    rubric = demo_rubric()
    return tiny_spec(tiny_model_path, tmp_path, rubric={"criteria": [*rubric["criteria"], BROKEN]}, reward=reward)


def test_a_criterion_failing_on_every_rollout_is_a_metric_and_one_warning(tiny_model_path, tmp_path):
    spec, reporter = broken_spec(tiny_model_path, tmp_path), MemoryReporter()
    watch = FailureWatch(spec.reward.failure_warn_share, spec.reward.stop_after_failing_steps)
    stops = []
    with step_parts(spec) as parts:  # three steps' collection, their reward metrics into the run's watch
        for step in range(1, 4):
            found = parts.collector.collect(step - 1)
            watch.remember_errors(found.generated)
            metrics = reward_metrics(found.generated, parts.rubric.names)
            stops.append(watch.observe(step, metrics, reporter))
            reporter.metrics(step, metrics)
    assert stops == [None, None, None]  # a warning, not a stop, by default
    assert reporter.series("reward/criterion_failure_rate/broken") == [1.0, 1.0, 1.0]
    assert reporter.series("reward/criterion_failure_rate/letter") == [0.0, 0.0, 0.0]
    [(step, message)] = reporter.warnings  # at the start of the streak, not every step
    assert step == 1
    assert message.startswith("criterion 'broken' failed on 100% of step 1's rollouts")
    assert "the row has no field 'missing'" in message


def test_the_run_stops_failed_after_n_failing_steps_naming_the_criterion(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    result = train(broken_spec(tiny_model_path, tmp_path, stop_after_failing_steps=2), reporter)
    assert (result.status, result.steps) == ("failed", 2)
    state, detail = reporter.states[-1]
    assert state == "failed" and detail == result.detail
    assert detail.startswith("criterion 'broken' failed on more than 50% of the rollouts for 2 steps in a row")
    assert "last error: KeyError" in detail and "'missing'" in detail
    assert [step for step, _ in reporter.rollout_batches] == [1, 2]  # the evidence is reported
    assert reporter.checkpoints == []
