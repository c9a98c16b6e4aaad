"""The warnings for a run that cannot learn (trainers/run/learning_watch.py), from hand-made groups:
no reward difference in any group, a criterion constant everywhere, tool calls cut by the turn limit.
Each warns once, and not when the run can learn."""

from __future__ import annotations

from tests.trainers.helpers import tiny_spec
from trainers.episodes import Episode, ToolCall, Turn
from trainers.report import CriterionScore, MemoryReporter
from trainers.rewards.sample import RubricResult
from trainers.run.learning_watch import STEPS, LearningWatch
from trainers.update.groups import Group


def group(scores: list[dict[str, float]], *, cut_calls: int = 0) -> Group:
    """One group, a sample per dict of criterion scores (the reward is their sum); the first `cut_calls`
    samples end at the token limit inside a malformed tool call."""
    episodes = []
    for i in range(len(scores)):
        cut = i < cut_calls
        call = ToolCall(name="", error="malformed tool call: not JSON (Unterminated string at char 9)")
        episodes.append(Episode(prompt_ids=[1], messages=[], turns=[
            Turn(token_ids=[5, 6], text="<tool_call>{", finish_reason="length" if cut else "stop",
                 tool_calls=[call] if cut else [])
        ]))  # fmt: skip
    results = [
        RubricResult(reward=sum(s.values()), scores={k: CriterionScore(v) for k, v in s.items()}) for s in scores
    ]
    rewards = [r.reward for r in results]
    return Group(None, episodes, results, rewards, has_spread=len(set(rewards)) > 1)


def watch(spec, steps: list[list[Group]]) -> list[tuple[int | None, str]]:
    reporter, learning = MemoryReporter(), LearningWatch(spec)
    for step, groups in enumerate(steps, start=1):
        learning.observe(step, groups, reporter)
    return reporter.warnings


def test_groups_without_a_reward_difference_for_steps_in_a_row_warn_once(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path)
    alike = [group([{"answer": 0.0}] * 4), group([{"answer": 0.0}] * 4)]
    [(step, message)] = watch(spec, [alike] * (STEPS + 3))
    assert step == STEPS
    assert message.startswith(f"in {STEPS} steps no group's rewards differed (every one 0):")
    assert "algorithm.group_size, 4 now" in message


def test_one_group_with_a_difference_resets_the_count(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path)
    alike = [group([{"answer": 0.0}] * 4)]
    differs = [group([{"answer": 0.0}, {"answer": 1.0}, {"answer": 0.0}, {"answer": 0.0}])]
    assert watch(spec, [alike] * (STEPS - 1) + [differs] + [alike] * (STEPS - 1)) == []


def test_a_criterion_constant_on_every_rollout_warns_naming_it(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path)
    step_groups = [group([{"answer": a, "format": 0.0} for a in (0.0, 1.0, 1.0, 0.0)])]
    [(step, message)] = watch(spec, [step_groups] * STEPS)
    assert step == STEPS
    assert message.startswith(f"criterion 'format' scored 0 on every rollout in {STEPS} steps")


def test_tool_calls_cut_by_the_turn_limit_warn_with_the_setting(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path)
    scores = [{"answer": a} for a in (0.0, 1.0, 0.0, 1.0)]
    assert watch(spec, [[group(scores, cut_calls=0)]]) == []
    [(step, message)] = watch(spec, [[group(scores, cut_calls=2)], [group(scores, cut_calls=4)]])
    assert step == 1
    assert message.startswith("2 of 4 episodes at step 1 wrote a tool call that the turn's token limit "
                              "(rollout.max_new_tokens, 6) cut into malformed JSON")  # fmt: skip
