"""A procedural run's steps on the tiny model, the step's collection built alone: it draws
from the current level's pool, reports `procedural/*`, moves the level, and a resumed run follows the
same difficulty path. Training the policy is not what these check: the steps collect only (`stepped`)."""

import pytest

from tests.trainers.helpers import stepped
from trainers.demos.demo import demo_spec
from trainers.report import MemoryReporter
from trainers.run.tool_silence import SILENT_STEPS
from trainers.spec import RunSpec

# A random tiny model rarely solves a task, so the pass rate here is "the completion holds a
# digit": it varies from step to step with what the model samples, which makes the level move
# both ways through a narrow band.
DIGIT_RUBRIC = {
    "criteria": [{"name": "digit", "kind": "regex", "weight": 1.0, "params": {"pattern": r"\d"}}],
    "pass_threshold": 1.0,
}


def procedural_spec(model_path, tmp_path, **procedural) -> RunSpec:
    config = demo_spec(
        model_path, "unused", tmp_path / "out",
        optim={"total_steps": 6, "prompts_per_step": 2, "micro_batch_size": 8, "seed": 3},
        algorithm={"group_size": 4}, rollout={"max_new_tokens": 6}, checkpoint={"every_n_steps": 3},
    )  # fmt: skip
    config["data"] = {"procedural": {"task": "arithmetic", "window": 1, "target_band": [0.3, 0.5], **procedural}}
    config["rubric"] = DIGIT_RUBRIC
    return RunSpec.model_validate(config)


def levels_of(reporter: MemoryReporter) -> list[list[int]]:
    """Each step's prompts' levels, read from their ids ('L<level>-<i>')."""
    return [sorted({int(r.prompt_id.split("-")[0][1:]) for r in batch}) for _, batch in reporter.rollout_batches]


def test_the_level_follows_the_pass_rate_and_the_prompts_come_from_that_level(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    stepped(procedural_spec(tiny_model_path, tmp_path, start_difficulty=4), reporter)
    difficulty, rate = reporter.series("procedural/difficulty"), reporter.series("procedural/pass_rate")
    assert difficulty[0] == 4
    assert [[int(d)] for d in difficulty] == levels_of(reporter)
    for step in range(1, len(difficulty)):  # window 1: each step's rate decides the next level
        before, after, r = difficulty[step - 1], difficulty[step], rate[step - 1]
        expected = before + 1 if r > 0.5 else before - 1 if r < 0.3 else before
        assert after == min(max(expected, 1), 8), f"step {step}: rate {r} at level {before}"
    # Each step's rate is over 2 prompts x 4 samples, each a pass or not.
    assert all((r * 8).is_integer() for r in rate)
    assert len(set(difficulty)) > 1, f"the level never moved: {difficulty} (rates {rate})"


def test_without_adapt_the_level_stays(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    stepped(procedural_spec(tiny_model_path, tmp_path, start_difficulty=2, adapt=False), reporter)
    assert reporter.series("procedural/difficulty") == [2.0] * 6


def test_a_resumed_run_follows_the_same_difficulty_path(tiny_model_path, tmp_path):
    whole = MemoryReporter()
    stepped(procedural_spec(tiny_model_path, tmp_path / "whole", start_difficulty=4), whole)

    first = procedural_spec(tiny_model_path, tmp_path / "split", start_difficulty=4)
    stepped(first, MemoryReporter(), steps=3, save=True)  # stopped after step 3, its checkpoint saved
    resumed = MemoryReporter()
    second = procedural_spec(tiny_model_path, tmp_path / "split", start_difficulty=4)
    second.checkpoint.resume_from = "latest"
    stepped(second, resumed)
    assert [step for step, _ in resumed.metric_points] == [4, 5, 6]

    assert resumed.series("procedural/difficulty") == whole.series("procedural/difficulty")[3:]
    assert resumed.series("procedural/pass_rate") == pytest.approx(whole.series("procedural/pass_rate")[3:])
    ids = [[(r.prompt_id, r.completion) for r in batch] for _, batch in whole.rollout_batches[3:]]
    assert [[(r.prompt_id, r.completion) for r in batch] for _, batch in resumed.rollout_batches] == ids


def test_a_sampler_draws_within_the_current_level_as_it_moves(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    spec = procedural_spec(tiny_model_path, tmp_path, start_difficulty=4)
    spec.curriculum.sampler = "online_difficulty"  # reads every pool prompt's posterior: new levels have the prior
    stepped(spec, reporter)
    difficulty = reporter.series("procedural/difficulty")
    assert len(set(difficulty)) > 1, difficulty
    assert [[int(d)] for d in difficulty] == levels_of(reporter)


def test_a_single_turn_task_runs_in_a_tools_environment_whose_calculator_answers_it(tiny_model_path, tmp_path):
    """Procedural arithmetic with the calculator (issue 27: it was refused). The environment's reset gets the
    generated row (its prompt as the user message, its answer among the fields), the calculator computes that
    row's answer, and a run's episodes start from the generated prompts with the tools listed."""
    from trainers.data.procedural.rows import pool_rows
    from trainers.rollout.environments.base import EpisodeLimits
    from trainers.rollout.environments.kinds.tools import ToolsEnvironment

    tools = {"kind": "tools", "params": {"tools": [{"kind": "calculator"}]}, "max_turns": 2, "max_turn_tokens": 6}
    row = pool_rows("arithmetic", 0, 4, 1)[0]  # level 4: three 2-digit operands, + or -
    env = ToolsEnvironment.create(tools["params"], EpisodeLimits())
    try:
        start = env.reset({**row.fields, "messages": [{"role": "user", "content": row.prompt}]})
        assert (
            start.messages[-1] == {"role": "user", "content": row.prompt}
            and "calculator" in start.messages[0]["content"]
        )
        expression = row.prompt.removeprefix("What is ").removesuffix("?")
        result = env.step(
            f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{expression}"}}}}</tool_call>'
        )
    finally:
        env.close()
    assert [(call.name, call.result) for call in result.tool_calls] == [("calculator", row.fields["answer"])]

    spec = procedural_spec(tiny_model_path, tmp_path, start_difficulty=4, adapt=False)
    spec = RunSpec.model_validate({**spec.model_dump(), "environment": tools, "optim": {**spec.optim.model_dump(),
                                   "total_steps": SILENT_STEPS}})  # fmt: skip
    reporter = MemoryReporter()
    stepped(spec, reporter)
    # The tiny random model never calls the calculator: the run's page is told so, once.
    assert reporter.series("episode/tool_calls_mean") == [0.0] * SILENT_STEPS
    assert [(step, text.split(":")[0]) for step, text in reporter.warnings if "tool" in text] == [
        (SILENT_STEPS, f"no episode called a tool in {SILENT_STEPS} steps")
    ]
    _, rollouts = reporter.rollout_batches[0]
    assert len(rollouts) == 8 and all(r.turns for r in rollouts)
    for r in rollouts:
        assert r.prompt_id.startswith("L4-")
        assert "calculator" in r.prompt[0]["content"] and r.prompt[-1]["content"].startswith("What is ")
