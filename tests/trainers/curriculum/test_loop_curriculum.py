"""The curriculum on the tiny model: the default draws as before and the samplers' randomness moves nothing
else, budgets give groups of their own sizes (both on a step's parts, tests.trainers.helpers.stepped, with
the update); in whole runs (what the trainer reports and how a run resumes), events are reported and the
samplers' choices survive a resume."""

import pytest

from tests.trainers.helpers import stepped, tiny_spec
from trainers.data.prompts import load_prompts
from trainers.data.source import PromptSource
from trainers.report import MemoryReporter
from trainers.run.loop import train
from trainers.spec import RunSpec

NONDETERMINISTIC = ("timing/", "perf/")


def run(spec: RunSpec, **kwargs) -> MemoryReporter:
    reporter = MemoryReporter()
    train(spec, reporter, **kwargs)
    return reporter


def stepped_run(spec: RunSpec) -> MemoryReporter:
    """`spec`'s steps on its parts (collection and the update), reported as a run reports them."""
    reporter = MemoryReporter()
    stepped(spec, reporter, update=True)
    return reporter


def groups_of(reporter: MemoryReporter) -> list[list[tuple[str, int]]]:
    """Per step: (group id, rollouts in the group) in order."""
    out = []
    for _, batch in reporter.rollout_batches:
        sizes: dict[str, int] = {}
        for r in batch:
            sizes[r.prompt_id] = sizes.get(r.prompt_id, 0) + 1
        out.append(list(sizes.items()))
    return out


def test_the_default_curriculum_draws_the_data_order_and_its_randomness_moves_nothing_else(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path / "default", optim={"total_steps": 3, "seed": 5})
    default = stepped_run(spec)
    from transformers import AutoTokenizer

    source = PromptSource(load_prompts(spec.data, AutoTokenizer.from_pretrained(tiny_model_path)), seed=5)
    expected = [[p.id for p in source.next_batch(2)] for _ in range(3)]
    assert [[pid for pid, _ in step] for step in groups_of(default)] == expected
    assert all(size == 4 for step in groups_of(default) for _, size in step)

    # online_difficulty with a floor of 1 draws every slot in data order, while drawing from its own
    # generator each step (a binomial and a Beta sample per prompt): completions and rewards must
    # be those of the default run, token for token.
    curious = stepped_run(tiny_spec(tiny_model_path, tmp_path / "floor", optim={"total_steps": 3, "seed": 5},
                            curriculum={"sampler": "online_difficulty", "exploration_floor": 1.0}))  # fmt: skip
    for (_, a), (_, b) in zip(default.rollout_batches, curious.rollout_batches, strict=True):
        assert [(r.prompt_id, r.completion, r.reward) for r in a] == [(r.prompt_id, r.completion, r.reward) for r in b]
    for (_, a), (_, b) in zip(default.metric_points, curious.metric_points, strict=True):
        assert {k: v for k, v in a.items() if not k.startswith(NONDETERMINISTIC)} == pytest.approx(
            {k: v for k, v in b.items() if not k.startswith(NONDETERMINISTIC)}
        )


def test_each_step_reports_the_prompts_it_drew_and_the_status_fractions(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 3})
    reporter = run(spec)
    assert [step for step, _ in reporter.prompt_stat_batches] == [1, 2, 3]
    for (step, events), step_groups in zip(reporter.prompt_stat_batches, groups_of(reporter), strict=True):
        assert [e["prompt_id"] for e in events] == [pid for pid, _ in step_groups]
        assert all(e["last_step"] == step and e["step_samples"] == 4 for e in events)
    # The events agree with the rollouts: passes are rubric.pass_threshold's verdicts.
    threshold = spec.rubric.pass_threshold
    step, events = reporter.prompt_stat_batches[0]
    rollouts = reporter.rollout_batches[0][1]
    for e in events:
        assert e["step_passed"] == sum(r.reward >= threshold for r in rollouts if r.prompt_id == e["prompt_id"])
    fractions = {k: v for k, v in reporter.metric_points[-1][1].items() if k.startswith("prompts/")}
    assert set(fractions) == {"prompts/unseen_frac", "prompts/solved_frac", "prompts/learnable_frac",
                              "prompts/never_solved_frac"}  # fmt: skip
    assert sum(fractions.values()) == pytest.approx(1.0)
    assert fractions["prompts/unseen_frac"] < 1.0


def test_a_knapsack_budget_trains_on_groups_of_their_own_sizes_with_dynamic_sampling(tiny_model_path, tmp_path):
    spec = tiny_spec(
        tiny_model_path, tmp_path, optim={"total_steps": 3, "prompts_per_step": 3},
        algorithm={"group_size": 4, "dynamic_sampling": True, "dynamic_sampling_max_rounds": 2},
        curriculum={"sampler": "online_difficulty", "budget": "knapsack", "min_group_size": 2, "max_group_size": 7,
                    "prior_alpha": 1.0, "prior_beta": 3.0},
    )  # fmt: skip
    reporter = stepped_run(spec)
    sizes = [size for step in groups_of(reporter) for _, size in step]
    assert all(2 <= s <= 7 for s in sizes) and len(set(sizes)) > 1
    first_round = [size for _, size in groups_of(reporter)[0][:3]]
    assert sum(first_round) == 12  # the budget: prompts_per_step x group_size
    assert all("actor/loss" in values or values["data/groups_kept"] == 0 for _, values in reporter.metric_points)
    for _, batch in reporter.rollout_batches:  # each trained group's advantages sum to 0 within itself (GRPO)
        by_group: dict[str, list[float]] = {}
        for r in batch:
            if r.trained:
                by_group.setdefault(r.prompt_id, []).append(r.advantage)
        assert all(abs(sum(a)) < 1e-4 for a in by_group.values())


def test_a_resumed_run_draws_what_the_uninterrupted_run_draws(tiny_model_path, tmp_path):
    overrides = {
        "optim": {"total_steps": 4, "seed": 3},
        "checkpoint": {"every_n_steps": 2},
        "curriculum": {"sampler": "online_difficulty", "budget": "knapsack", "max_group_size": 6, "decay": 0.8},
    }
    whole = run(tiny_spec(tiny_model_path, tmp_path / "whole", **overrides))
    interrupted = MemoryReporter()
    train(tiny_spec(tiny_model_path, tmp_path / "split", **overrides), interrupted,
          should_stop=lambda: len(interrupted.metric_points) == 2)  # fmt: skip
    second = tiny_spec(tiny_model_path, tmp_path / "split", **overrides)
    second.checkpoint.resume_from = "latest"
    resumed = run(second)
    assert groups_of(resumed) == groups_of(whole)[2:]
    assert resumed.prompt_stat_batches == whole.prompt_stat_batches[2:]
    assert [[r.completion for r in b] for _, b in resumed.rollout_batches] == [
        [r.completion for r in b] for _, b in whole.rollout_batches[2:]
    ]
