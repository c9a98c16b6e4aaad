"""Validation during training (trainers/validation.py): the spec's refusals, the holdout split, the
metrics against hand-computed values, the schedule (resume included), and the run's random stream
left untouched."""

import pytest
import torch
from pydantic import ValidationError
from safetensors.torch import load_file

from tests.trainers.helpers import stepped, tiny_spec
from trainers.data.readers import DataError
from trainers.demos.demo import HELD_OUT_PROMPTS, make_demo_dataset
from trainers.report import MemoryReporter
from trainers.run import stopping
from trainers.run.checkpoint import list_checkpoints
from trainers.run.evaluate import sampled_metrics
from trainers.run.loop import train
from trainers.run.validation import DEFAULT_PASS_REWARD, Validator, held_out_rows
from trainers.spec import ValidationSpec, validation_errors

TRAINING_ONLY = ("timing/", "perf/", "val/")  # wall-clock numbers differ between any two runs


def held_out_dataset(tmp_path):
    return str(make_demo_dataset(tmp_path / "held_out.jsonl", prompts=HELD_OUT_PROMPTS))


def training_points(reporter: MemoryReporter) -> list[tuple[int, dict[str, float]]]:
    """The training steps' metrics: validation reports its own metrics call, with val/ keys only."""
    out = []
    for step, values in reporter.metric_points:
        kept = {k: v for k, v in values.items() if not k.startswith(TRAINING_ONLY)}
        if kept:
            out.append((step, kept))
    return out


def validate_alone(spec, *, step: int, reporter: MemoryReporter) -> None:
    """The validation stage on its own, as a run builds it (its held-out prompts, an engine over the model,
    the rubric), without training: one validation reported at `step`."""
    from trainers.data.prompts import load_prompts
    from trainers.models.loading import default_device, load_policy
    from trainers.rewards.rubric import Rubric
    from trainers.rollout.engines.catalog import create_engine
    from trainers.run.validation import split_prompts

    model, tokenizer = load_policy(spec.model, default_device())
    held_out = split_prompts(spec, tokenizer, load_prompts(spec.data, tokenizer))[1]
    engine, rubric = create_engine(spec, model=model, tokenizer=tokenizer), Rubric.from_spec(spec.rubric)
    try:
        Validator(spec, held_out).run(step, engine, rubric, tokenizer, reporter)
    finally:
        engine.close()
        rubric.close()


def validation_points(reporter: MemoryReporter) -> list[tuple[int, dict[str, float]]]:
    return [(s, v) for s, v in reporter.metric_points if any(k.startswith("val/") for k in v)]


def rollouts_of(reporter: MemoryReporter, split: str) -> list:
    return [r for _, batch in reporter.rollout_batches for r in batch if r.split == split]


# ---------------------------------------------------------------- the spec


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"path": "v.jsonl", "holdout_fraction": 0.2}, "holdout_fraction", "not both"),
        ({}, "path", "set a held-out dataset (path) or a holdout_fraction"),
        ({"holdout_fraction": 0.2, "samples_per_prompt": 0}, "samples_per_prompt", "greater than or equal to 1"),
        ({"holdout_fraction": 1.0}, "holdout_fraction", "less than 1"),
        ({"holdout_fraction": 0.2, "every_n_steps": 0}, "every_n_steps", "greater than or equal to 1"),
    ],
)
def test_impossible_settings_are_refused_beside_their_field(values, field, message):
    with pytest.raises(ValidationError) as exc:
        ValidationSpec.model_validate(values)
    errors = validation_errors(exc.value)
    assert field in errors and message in errors[field], errors


def test_a_held_out_dataset_takes_the_training_data_s_field_mapping_unless_it_sets_its_own(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, data={"answer_field": "answer", "system_prompt": "Be brief."})
    data = ValidationSpec(path="v.jsonl", prompt_field="question", num_prompts=3).data_spec(spec.data)
    assert (data.path, data.split, data.limit) == ("v.jsonl", "validation", 3)
    assert (data.prompt_field, data.answer_field, data.system_prompt) == ("question", "answer", "Be brief.")


# ---------------------------------------------------------------- the holdout


def test_the_holdout_is_fixed_by_its_seed_and_leaves_rows_to_train_on():
    assert held_out_rows(10, 0.3, seed=0) == held_out_rows(10, 0.3, seed=0)
    assert len(held_out_rows(10, 0.3, seed=0)) == 3
    assert len({tuple(held_out_rows(10, 0.3, seed=s)) for s in range(5)}) > 1  # the seed chooses the rows
    assert held_out_rows(10, 0.01, seed=0) != []  # at least one row is held out
    with pytest.raises(DataError, match="holds out 2, leaving none to train on"):
        held_out_rows(2, 0.9, seed=0)


def test_a_fraction_that_leaves_no_training_rows_fails_the_run_saying_so(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, data={"limit": 2}, validation={"holdout_fraction": 0.9})
    reporter = MemoryReporter()
    with pytest.raises(DataError):
        train(spec, reporter)
    assert reporter.states[-1][0] == "failed" and "leaving none to train on" in reporter.states[-1][1]


def test_held_out_rows_are_validated_on_and_never_trained_on(tiny_model_path, tmp_path):
    data = make_demo_dataset(tmp_path / "eight.jsonl", letters="abcdefgh")
    overrides = {
        "data": {"path": str(data)},
        "optim": {"total_steps": 6, "prompts_per_step": 2},  # 12 draws from 6 rows: every row, twice
        "validation": {"holdout_fraction": 0.25, "holdout_seed": 3, "every_n_steps": 3, "samples_per_prompt": 2},
    }
    spec, reporter = tiny_spec(tiny_model_path, tmp_path, **overrides), MemoryReporter()
    stepped(spec, reporter)  # the run's six steps' collection: what it trains on
    validate_alone(spec, step=6, reporter=reporter)  # and its validation (each one samples the same prompts)
    held = {str(i + 1) for i in held_out_rows(8, 0.25, seed=3)}  # prompt ids are 1-based row numbers
    trained_on = {r.prompt_id.split("@")[0] for r in rollouts_of(reporter, "train")}
    assert trained_on == {str(i) for i in range(1, 9)} - held
    validated = rollouts_of(reporter, "validation")
    assert {r.prompt_id for r in validated} == held
    assert all(not r.trained and r.advantage == 0.0 for r in validated)


# ---------------------------------------------------------------- the metrics


def test_val_metrics_match_hand_computed_values():
    # Two prompts, k = 4: prompt A passes 2 of 4, prompt B none.
    rewards = [[1.0, 0.0, 0.5, 1.0], [0.0, 0.0, 0.0, 0.25]]
    passed = [[True, False, False, True], [False, False, False, False]]
    criteria = {"correct": [1, 0, 0, 1, 0, 0, 0, 0]}
    m = sampled_metrics("val", rewards, criteria, 4, passed)
    mean = (1 + 0.5 + 1 + 0.25) / 8
    assert m["val/reward/mean"] == pytest.approx(0.34375) and mean == 0.34375
    values = [1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0, 0.25]
    assert m["val/reward/std"] == pytest.approx((sum((v - mean) ** 2 for v in values) / 8) ** 0.5)
    assert m["val/reward/correct/mean"] == pytest.approx(0.25)
    assert m["val/pass@1"] == pytest.approx((2 / 4 + 0) / 2)
    assert m["val/pass@2"] == pytest.approx((1 - 1 / 6 + 0) / 2)  # A: 1 - C(2,2)/C(4,2)
    assert m["val/pass@4"] == pytest.approx((1 + 0) / 2)
    assert sorted(m) == sorted(["val/reward/mean", "val/reward/std", "val/reward/correct/mean", "val/pass@1",
                                "val/pass@2", "val/pass@4"])  # fmt: skip


@pytest.mark.parametrize("threshold", [0.5, None])
def test_reported_val_metrics_are_those_of_the_reported_validation_rollouts(tiny_model_path, tmp_path, threshold):
    # Without a rubric threshold a sample passes at full marks (reward >= 1); an empty completion
    # scores 0 on the letter rubric, and a lenient 'short' criterion gives rewards in between.
    rubric = {
        "criteria": [
            {"name": "letter", "kind": "python", "params": {"code": LETTER_CODE}},
            {"name": "short", "kind": "regex", "params": {"pattern": r"^\S{0,3}$"}},
        ],
        "combine": "formula",
        "formula": "max(letter, short)",
        "pass_threshold": threshold,
    }
    spec = tiny_spec(tiny_model_path, tmp_path, rubric=rubric, optim={"total_steps": 1},
                     validation={"path": held_out_dataset(tmp_path), "samples_per_prompt": 4, "num_prompts": 5})  # fmt: skip
    reporter = MemoryReporter()
    validate_alone(spec, step=1, reporter=reporter)
    [(step, metrics)] = validation_points(reporter)[-1:]
    assert step == 1
    rollouts = [r for r in rollouts_of(reporter, "validation") if r.step == 1]
    assert len(rollouts) == 5 * 4 and len({r.prompt_id for r in rollouts}) == 5
    cut = threshold if threshold is not None else DEFAULT_PASS_REWARD
    by_prompt: dict[str, list[bool]] = {}
    for r in rollouts:
        by_prompt.setdefault(r.prompt_id, []).append(r.reward >= cut)
    assert metrics["val/reward/mean"] == pytest.approx(sum(r.reward for r in rollouts) / 20)
    assert metrics["val/reward/short/mean"] == pytest.approx(sum(r.scores["short"].score for r in rollouts) / 20)
    assert metrics["val/pass@1"] == pytest.approx(sum(sum(p) / 4 for p in by_prompt.values()) / 5)
    assert metrics["val/pass@4"] == pytest.approx(sum(any(p) for p in by_prompt.values()) / 5)
    assert {"val/pass@2", "timing/validation_s"} <= metrics.keys()


LETTER_CODE = """\
def score(prompt, completion, answer, **fields):
    chars = [c for c in completion if not c.isspace()]
    return (sum(c == answer for c in chars) / len(chars)) if chars else 0.0
"""


# ---------------------------------------------------------------- the schedule


def test_validation_is_due_every_n_steps_at_the_last_step_and_at_start(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 5},
                     validation={"holdout_fraction": 0.25, "every_n_steps": 2})  # fmt: skip
    validator = Validator(spec, prompts=["a placeholder prompt"])
    assert [s for s in range(6) if validator.due(s)] == [0, 2, 4, 5]
    spec.validation.at_start = False
    assert [s for s in range(6) if validator.due(s)] == [2, 4, 5]


def test_a_resumed_run_goes_on_with_the_schedule_and_the_same_validation_samples(tiny_model_path, tmp_path):
    overrides = {
        "optim": {"total_steps": 4, "seed": 5},
        "checkpoint": {"every_n_steps": 2},
        "validation": {"path": held_out_dataset(tmp_path), "every_n_steps": 2, "samples_per_prompt": 2},
    }
    whole = MemoryReporter()
    train(tiny_spec(tiny_model_path, tmp_path / "whole", **overrides), whole)
    assert [s for s, _ in validation_points(whole)] == [0, 2, 4]

    first = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path / "split", **overrides)
    # Stopped once step 2 is whole: validated, then checkpointed (a stop inside its validation: the next test).
    train(spec, first, should_stop=lambda: len(first.checkpoints) == 1)
    resumed = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path / "split", **overrides)
    spec.checkpoint.resume_from = "latest"
    train(spec, resumed)
    assert [s for s, _ in validation_points(first)] == [0, 2]
    assert [s for s, _ in validation_points(resumed)] == [4]  # no second baseline, no step 2 again
    expected = {k: v for k, v in validation_points(whole)[-1][1].items() if k.startswith("val/")}
    got = {k: v for k, v in validation_points(resumed)[-1][1].items() if k.startswith("val/")}
    assert got == pytest.approx(expected)
    completions = [r.completion for r in rollouts_of(whole, "validation") if r.step == 4]
    assert [r.completion for r in rollouts_of(resumed, "validation")] == completions


def test_a_stop_inside_a_validation_leaves_it_to_the_resumed_run(tiny_model_path, tmp_path, monkeypatch):
    """A stop asked for while step 2's validation samples cuts it short (a stop ends within a token); the
    step itself is whole, so its checkpoint is kept and the resumed run validates step 2 first, with the
    samples an uninterrupted run drew, then goes on with the schedule."""
    # Asked at every token, so the stop lands inside the validation however fast this machine samples it.
    monkeypatch.setattr(stopping, "ASK_EVERY_S", 0.0)
    overrides = {
        "optim": {"total_steps": 4, "seed": 5},
        "checkpoint": {"every_n_steps": 2},
        "validation": {"path": held_out_dataset(tmp_path), "every_n_steps": 2, "samples_per_prompt": 2},
    }
    whole = MemoryReporter()
    train(tiny_spec(tiny_model_path, tmp_path / "whole", **overrides), whole)

    first = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path / "split", **overrides)
    result = train(spec, first, should_stop=lambda: len(training_points(first)) == 2)  # asked inside step 2's validation
    assert result.status == "cancelled" and [s for s, _ in first.checkpoints] == [2]
    assert [s for s, _ in validation_points(first)] == [0]
    resumed = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path / "split", **overrides)
    spec.checkpoint.resume_from = "latest"
    train(spec, resumed)
    assert [s for s, _ in validation_points(resumed)] == [2, 4]
    for (_, got), (_, expected) in zip(validation_points(resumed), validation_points(whole)[1:], strict=True):
        assert {k: v for k, v in got.items() if k.startswith("val/")} == pytest.approx(
            {k: v for k, v in expected.items() if k.startswith("val/")}
        )
    completions = [r.completion for r in rollouts_of(whole, "validation") if r.step >= 2]
    assert [r.completion for r in rollouts_of(resumed, "validation")] == completions


# ---------------------------------------------------------------- the run's random stream


def test_a_run_with_validation_trains_exactly_as_one_without(tiny_model_path, tmp_path):
    base = {"optim": {"total_steps": 3, "seed": 11}}
    plain, validated = MemoryReporter(), MemoryReporter()
    plain_result = train(tiny_spec(tiny_model_path, tmp_path / "plain", **base), plain)
    validation = {"path": held_out_dataset(tmp_path), "every_n_steps": 1, "samples_per_prompt": 3, "temperature": 0.7}
    validated_result = train(tiny_spec(tiny_model_path, tmp_path / "val", **base, validation=validation), validated)

    assert len(rollouts_of(validated, "validation")) == 4 * 12 * 3  # steps 0-3 x 12 held-out prompts x k
    assert training_points(validated) == training_points(plain)  # exactly: same rewards, losses, grad norms
    train_completions = [[r.completion for r in batch] for _, batch in plain.rollout_batches]
    validated_batches = ([r.completion for r in batch if r.split == "train"] for _, batch in validated.rollout_batches)
    assert [batch for batch in validated_batches if batch] == train_completions
    plain_weights = load_file(list_checkpoints(tmp_path / "plain" / "out")[-1] / "model.safetensors")
    validated_weights = load_file(list_checkpoints(tmp_path / "val" / "out")[-1] / "model.safetensors")
    assert plain_result.checkpoint and validated_result.checkpoint
    assert plain_weights.keys() == validated_weights.keys()
    assert all(torch.equal(plain_weights[k], validated_weights[k]) for k in plain_weights)
