"""An evaluation suite on the tiny model and a checkpoint of it: every task on every model, the same draws
for the same weights whatever ran before, each pair reported on its own, failures kept to their pairs."""

import pytest
from pydantic import ValidationError

from trainers.demos.demo import make_demo_dataset
from trainers.report import MemoryReporter
from trainers.run.evaluate import pass_at_k
from trainers.run.suite import MemorySuiteReporter, evaluate_suite
from trainers.spec.suite import SuiteSpec


def regex_rubric(pattern: str) -> dict:
    return {"criteria": [{"name": "match", "kind": "regex", "params": {"pattern": pattern}}]}


@pytest.fixture(scope="module")
def letters(tmp_path_factory):
    return make_demo_dataset(tmp_path_factory.mktemp("suite-data") / "letters.jsonl")


@pytest.fixture(scope="module")
def checkpoint(tiny_model_path, tmp_path_factory):
    from tests.trainers.helpers import tiny_spec
    from trainers.run.loop import train

    spec = tiny_spec(tiny_model_path, tmp_path_factory.mktemp("suite-run"), optim={"total_steps": 1})
    return train(spec, MemoryReporter()).checkpoint


def suite(model_path, letters, models: list[dict], **overrides) -> SuiteSpec:
    data = {"path": str(letters), "prompt_field": "prompt", "answer_field": "answer"}
    tasks = [
        # Every completion matches: pass@1 = pass@k = 1 exactly, with an interval of width 0.
        {"name": "anything", "data": data, "rubric": regex_rubric(r"[\s\S]*"), "samples_per_prompt": 2,
         "num_prompts": 3},
        # Some completions hold an "a", some do not (a random model): pass rates in between.
        {"name": "has-a", "data": data, "rubric": regex_rubric("a"), "samples_per_prompt": 4, "num_prompts": 4,
         "temperature": 1.5, "max_new_tokens": 4},
    ]  # fmt: skip
    config = {"name": "letters", "tasks": tasks, "rollout": {"max_new_tokens": 6}, "seed": 5,
              "models": [{**m, "model": {"path": str(model_path)}} for m in models]}  # fmt: skip
    return SuiteSpec.model_validate({**config, **overrides})


def test_every_task_on_every_model_with_the_same_draws(tiny_model_path, letters, checkpoint):
    spec = suite(tiny_model_path, letters, [
        {"label": "base"}, {"label": "step 1", "checkpoint": checkpoint, "step": 1}, {"label": "base again"},
    ])  # fmt: skip
    reporter = MemorySuiteReporter()
    result = evaluate_suite(spec, reporter)
    assert result.status == "succeeded" and not result.failures
    pairs = [(m, t) for m in ("base", "step 1", "base again") for t in ("anything", "has-a")]
    assert list(result.scores) == pairs and list(reporter.cell_scores) == pairs
    assert [line.split(":")[0] for line in reporter.lines] == ["base", "step 1", "base again"]  # loaded once each

    def rollouts(model, task):
        return [r for _, batch in reporter.cells[(model, task)].rollout_batches for r in batch]

    for model, task in pairs:
        cell, (n, k) = reporter.cells[(model, task)], ((3, 2) if task == "anything" else (4, 4))
        got = rollouts(model, task)
        assert [r.prompt_id for r in got[::k]] == ["1", "2", "3", "4"][:n]  # file order, never shuffled
        assert [s for s, _ in cell.states] == ["running", "succeeded"]
        scores = result.scores[(model, task)]
        assert (scores.num_prompts, scores.k) == (n, k)
        ((step, metrics),) = cell.metric_points
        assert step == 0 and metrics["eval/reward/mean"] == pytest.approx(scores.reward_mean.value)
        assert metrics[f"eval/pass@{k}_low"] == scores.pass_at_k.low
        # pass@1 and pass@k from the reported rollouts, worked out here (no threshold: passing is reward >= 1).
        passes = [sum(r.reward >= 1 for r in got[i : i + k]) for i in range(0, len(got), k)]
        assert scores.pass_at_1.value == pytest.approx(sum(c / k for c in passes) / n)
        assert scores.pass_at_k.value == pytest.approx(sum(pass_at_k(k, c, k) for c in passes) / n)
        assert scores.pass_at_1.low <= scores.pass_at_1.value <= scores.pass_at_1.high
        assert all(r.num_tokens <= (6 if task == "anything" else 4) for r in got)  # the task's own max_new_tokens
    assert result.scores[("base", "anything")].pass_at_k.low == 1.0
    # The same weights sample the same completions, whatever ran on the engine in between: a fair comparison.
    for task in ("anything", "has-a"):
        assert [r.completion for r in rollouts("base", task)] == [r.completion for r in rollouts("base again", task)]
    assert result.scores[("base", "has-a")] == result.scores[("base again", "has-a")]


def test_a_model_that_cannot_load_fails_its_pairs_only(tiny_model_path, letters, tmp_path):
    spec = suite(tiny_model_path, letters, [{"label": "gone", "checkpoint": str(tmp_path / "step-9")},
                                            {"label": "base"}])  # fmt: skip
    reporter = MemorySuiteReporter()
    result = evaluate_suite(spec, reporter)
    assert result.status == "failed" and set(result.failures) == {("gone", "anything"), ("gone", "has-a")}
    assert set(result.scores) == {("base", "anything"), ("base", "has-a")}
    state, detail = reporter.cells[("gone", "has-a")].states[-1]
    assert state == "failed" and "step-9" in detail


def test_stopping_cancels_the_pairs_not_reached(tiny_model_path, letters):
    spec = suite(tiny_model_path, letters, [{"label": "base"}, {"label": "again"}])
    reporter = MemorySuiteReporter()
    result = evaluate_suite(spec, reporter, should_stop=lambda: bool(reporter.cells.get(("base", "anything"))
                                                                     and reporter.cell_scores))  # fmt: skip
    assert result.status == "cancelled" and list(result.scores) == [("base", "anything")]
    assert reporter.cells[("base", "has-a")].states[-1][0] == "cancelled"
    assert reporter.cells[("again", "anything")].states[-1][0] == "cancelled"


def test_a_task_that_makes_no_valid_run_is_refused_at_its_place(tiny_model_path, letters):
    procedural = {"procedural": {"task": "guess_number"}, "prompt_field": "prompt"}
    with pytest.raises(ValidationError) as caught:
        suite(tiny_model_path, letters, [{"label": "base"}],
              tasks=[{"name": "guess", "data": procedural, "rubric": regex_rubric("x")}])  # fmt: skip
    assert caught.value.errors()[0]["loc"][:4] == ("tasks", "0", "data", "procedural")
    with pytest.raises(ValidationError, match="model labels must be unique; repeated: base"):
        suite(tiny_model_path, letters, [{"label": "base"}, {"label": "base"}])
    twice = suite(tiny_model_path, letters, [{"label": "base"}]).model_dump()["tasks"][:1] * 2
    with pytest.raises(ValidationError, match="task names must be unique; repeated: anything"):
        suite(tiny_model_path, letters, [{"label": "base"}], tasks=twice)


def test_an_evaluation_run_is_the_one_pair_case_of_a_suite(tiny_model_path, letters):
    from trainers.run.evaluate import evaluate

    spec = suite(tiny_model_path, letters, [{"label": "base"}])
    spec = spec.model_copy(update={"tasks": spec.tasks[1:]})  # has-a: passes vary
    reporter = MemorySuiteReporter()
    evaluate_suite(spec, reporter)
    alone = MemoryReporter()
    result = evaluate(spec.cell_spec(spec.models[0], spec.tasks[0]), alone)
    ((_, in_suite),) = reporter.cells[("base", "has-a")].metric_points
    assert result.metrics == in_suite  # eval/reward/mean, eval/pass@j, and the intervals: the same numbers
    assert {"eval/pass@1_low", "eval/pass@4_high", "eval/reward_mean_low"} <= set(result.metrics)

    def completions(r):
        return [x.completion for _, batch in r.rollout_batches for x in batch]

    assert completions(alone) == completions(reporter.cells[("base", "has-a")])


def test_a_suite_with_vllm_closes_each_models_engine_and_draws_alike(tiny_model_path, letters, vllm_here):
    vllm = {"engine": "vllm", "vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1, "max_new_tokens": 6}
    spec = suite(tiny_model_path, letters, [{"label": "base"}, {"label": "base again"}], rollout=vllm)
    reporter = MemorySuiteReporter()
    result = evaluate_suite(spec, reporter)
    assert result.status == "succeeded" and len(result.scores) == 4
    assert result.scores[("base", "anything")].pass_at_1.value == 1.0

    def completions(model, task):
        return [r.completion for _, batch in reporter.cells[(model, task)].rollout_batches for r in batch]

    assert completions("base", "has-a") == completions("base again", "has-a")  # a new engine, the same seed
