"""Hints in a run on the tiny model: a group that all failed is retried with the start of the
reference solution opening the answer, the retry trains in its place, and the hint's tokens are
never in the loss. The rubric asks for a completion starting "the answer", which the random tiny
model never writes, while the hint (the solution "the answer is yes please", 5 tokens, cut at 0.5
-> 3 tokens, at 0.25 -> 2) writes it for it."""

import json

import pytest

from tests.trainers.helpers import step_parts, stepped, tiny_spec
from trainers.curriculum.budgets import Allocation
from trainers.report import MemoryReporter
from trainers.run.collection import Collected
from trainers.update.step_batch import build_step_batch

SOLUTION = "the answer is yes please"
STARTS_WITH_THE_ANSWER = {"criteria": [{"name": "starts", "kind": "regex", "params": {"pattern": "^the answer"}}]}


def hint_spec(model_path, tmp_path, **overrides):
    data = tmp_path / "hinted.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": f"Repeat the letter: {c}", "answer": c, "solution": SOLUTION}) + "\n"
                for c in "abcd")
    )  # fmt: skip
    curriculum = {"hints": True, "hint_field": "solution", **overrides.pop("curriculum", {})}
    return tiny_spec(
        model_path, tmp_path, data={"path": str(data), "extra_fields": ["solution"]}, rubric=STARTS_WITH_THE_ANSWER,
        curriculum=curriculum, **overrides,
    )  # fmt: skip


def test_an_all_failed_group_is_retried_with_a_hint_that_trains_in_its_place(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    stepped(hint_spec(tiny_model_path, tmp_path), reporter)  # three steps' collection (hints are part of it)
    # 4 prompts, 2 a step: steps 1 and 2 hint every prompt for the first time (0.5); each hinted group
    # passes, so step 3 (the next epoch) hints at 0.5 * 0.5.
    assert reporter.series("hints/mean_fraction") == [0.5, 0.5, 0.25]
    assert reporter.series("hints/groups_hinted") == [2.0, 2.0, 2.0]
    assert reporter.series("hints/hinted_pass_rate") == [1.0, 1.0, 1.0]
    assert reporter.series("reward/mean") == [0.0, 0.0, 0.0]  # the unhinted first round, as without hints
    for step, rollouts in reporter.rollout_batches:
        plain = [r for r in rollouts if r.hint is None]
        hinted = [r for r in rollouts if r.hint is not None]
        assert len(plain) == len(hinted) == 2 * 4
        assert all(r.reward == 0.0 and not r.trained for r in plain)  # replaced in training by the retry
        assert all(r.reward == 1.0 and r.trained for r in hinted)
        expected = ("the answer is", 0.5) if step < 3 else ("the answer", 0.25)
        assert {(r.hint, r.hint_fraction) for r in hinted} == {expected}
        # The completion is what the model wrote after the hint; each hinted group is its own group.
        assert not any(r.completion.startswith("the answer") for r in hinted)
        assert {r.prompt_id.split("@")[0] for r in hinted} == {r.prompt_id for r in plain}
        assert all(r.prompt_id.endswith("@2") for r in hinted)


def test_the_hint_tokens_are_outside_the_loss_mask(tiny_model_path, tmp_path):
    spec = hint_spec(tiny_model_path, tmp_path)
    with step_parts(spec) as parts:
        found = parts.collector.collect(0)
        hinted = [g for g in found.kept if g.prompt.hint is not None]
        assert len(hinted) == 2 and len(found.generated) == 4
        hint_ids = parts.tokenizer(hinted[0].prompt.hint.text, add_special_tokens=False).input_ids
        assert len(hint_ids) == hinted[0].prompt.hint.num_tokens == 3
        batch = build_step_batch(
            hinted, spec.algorithm, pad_id=parts.tokenizer.pad_token_id, device=parts.collector.device
        )
        P = batch.tokens.prompt_len
        for i, ep in enumerate(ep for g in hinted for ep in g.episodes):
            sampled = ep.turns[0].token_ids
            # The sequence is prompt + hint, then only what the model sampled: the hint ends the prompt columns.
            assert batch.tokens.input_ids[i, P - 3 : P].tolist() == hint_ids
            assert batch.tokens.completion_ids[i, : len(sampled)].tolist() == sampled
            # The loss covers exactly the sampled tokens.
            assert batch.loss_mask[i].sum().item() == len(sampled)
            assert batch.loss_mask[i, : len(sampled)].tolist() == [1.0] * len(sampled)


def test_hint_levels_resume_from_the_checkpoint(tiny_model_path, tmp_path):
    out = tmp_path / "out"
    first = hint_spec(tiny_model_path, tmp_path, optim={"total_steps": 2}, checkpoint={"output_dir": str(out)})
    stepped(first, MemoryReporter(), save=True)  # two steps' collection, then the run's checkpoint of step 2
    resumed = hint_spec(
        tiny_model_path, tmp_path, checkpoint={"output_dir": str(out), "resume_from": "latest"}
    )  # total_steps 3: one more step, whose prompts were hinted (and passed) before the stop
    reporter = MemoryReporter()
    stepped(resumed, reporter)
    assert reporter.series("hints/mean_fraction") == [0.25]  # 0.5 without the saved levels


def test_without_hints_no_group_is_retried(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    stepped(hint_spec(tiny_model_path, tmp_path, curriculum={"hints": False}, optim={"total_steps": 1}), reporter)
    assert not any(key.startswith("hints/") for key in reporter.metric_points[0][1])
    assert all(r.hint is None for r in reporter.rollout_batches[0][1]) and len(reporter.rollout_batches[0][1]) == 8


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"curriculum": {"hint_field": "missing"}}, "hint_field 'missing' is not a field the rows carry"),
        ({"curriculum": {"hint_start_fraction": 0.05}}, "hint_start_fraction must lie between"),
    ],
)
def test_bad_hint_settings_are_refused_with_the_reason(tiny_model_path, tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        hint_spec(tiny_model_path, tmp_path, **change)


def test_a_hinted_retry_is_as_large_as_the_group_it_replaces(tiny_model_path, tmp_path):
    # The budget gives group_size (4) to a prompt; a failed group of 3 is retried with 3, not 4.
    with step_parts(hint_spec(tiny_model_path, tmp_path)) as parts:
        collector = parts.collector
        found = Collected([], [], 1, {"generate": 0.0, "score": 0.0})
        prompt = parts.curriculum.draw(1)
        [failed] = collector.generate_and_score(prompt, 0, found, Allocation([3]))
        found.generated.append(failed)
        [retry] = collector.with_hints([failed], 0, found)
        assert retry.prompt.hint is not None and len(retry.episodes) == 3
        assert found.generated == [failed, retry]
