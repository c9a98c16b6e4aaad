"""GRPO on SmolLM2-135M-Instruct's real weights with the transformers engine, cut to what CI affords
on a CPU (2 prompts x 4 completions of up to 16 tokens a step): two steps train the model, a run
resumed from the checkpoint written after step 1 equals the uninterrupted one at step 2, and LoRA
trains its adapters alone. Two steps sampled by vLLM: tests/trainers/rollout/engines/test_vllm_real.py."""

import math

import pytest
import torch

from tests.trainers.helpers import real_spec
from tests.trainers.run.test_checkpoint import comparable
from trainers.report import MemoryReporter
from trainers.run.loop import Trainer, train
from trainers.update.step_batch import build_step_batch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def whole_run(real_model_path, tmp_path_factory):
    """Two uninterrupted steps, checkpointed after each: (reporter, spec, the trained tensors that
    still equal the initial ones, per completion of step 2: (ended by EOS, whether its last token is
    trained on))."""
    reporter = MemoryReporter()
    spec = real_spec(real_model_path, tmp_path_factory.mktemp("whole"), checkpoint={"every_n_steps": 1, "keep_last": 2})
    trainer = Trainer(spec, reporter)
    try:
        initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
        records = []
        step = trainer.step
        trainer.step = lambda: records.append(step()) or records[-1]  # keeps what each step did
        assert trainer.fit(should_stop=lambda: False).status == "succeeded"
        unchanged = [name for name, p in trainer.model.named_parameters() if torch.equal(initial[name], p.detach())]
        last_groups = records[-1].generated
        episodes = [ep for grp in last_groups for ep in grp.episodes]
        # the layout step 2 trained on
        batch = build_step_batch(last_groups, spec.algorithm, pad_id=trainer.lockstep.pad_id, device=trainer.device)
        last = [len(ep.completion_ids) - 1 for ep in episodes]
        ends = [(ep.completion_ids[-1] == trainer.tokenizer.eos_token_id, bool(batch.loss_mask[i, j] == 1))
                for i, (ep, j) in enumerate(zip(episodes, last, strict=True))]  # fmt: skip
    finally:
        trainer.close()
    return reporter, spec, unchanged, ends


def test_two_grpo_steps_end_with_finite_losses_and_changed_weights(whole_run):
    reporter, _, unchanged, _ = whole_run
    assert [s for s, _ in reporter.metric_points] == [1, 2]
    for _, metrics in reporter.metric_points:
        assert math.isfinite(metrics["actor/loss"]) and metrics["actor/grad_norm"] > 0
        assert metrics["reward/std"] > 0  # the rubric told completions apart: the step had a signal
    assert all(1 <= r.num_tokens <= 16 for _, batch in reporter.rollout_batches for r in batch)
    assert not unchanged, unchanged[:5]


def test_the_eos_that_ends_a_completion_is_trained_on_although_it_is_also_the_padding(whole_run):
    """SmolLM2's pad token is its EOS (<|im_end|>): the batch's masks come from lengths, not from
    comparing ids with the pad id, so a completion's own EOS is trained on (the model learns to stop)."""
    *_, ends = whole_run
    assert any(eos for eos, _ in ends), "no completion of step 2 ended by EOS: nothing checked"
    assert all(trained for _, trained in ends)


def test_a_run_resumed_from_its_step_1_checkpoint_equals_the_uninterrupted_run(whole_run, real_model_path, tmp_path):
    whole, _, _, _ = whole_run
    assert [s for s, _ in whole.checkpoints] == [1, 2]
    resumed = MemoryReporter()
    again = real_spec(real_model_path, tmp_path)
    again.checkpoint.resume_from = whole.checkpoints[0][1]  # written after step 1 (optimiser, data, RNG state)
    assert train(again, resumed).steps == 2

    assert [s for s, _ in resumed.metric_points] == [2]
    expected, got = comparable(whole.metric_points[1][1]), comparable(resumed.metric_points[0][1])
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == pytest.approx(expected[key], abs=1e-6), key
    assert [r.completion for r in resumed.rollout_batches[0][1]] == [r.completion for r in whole.rollout_batches[1][1]]


def test_lora_trains_the_adapters_and_leaves_the_real_weights_frozen(real_model_path, tmp_path):
    lora = {"r": 8, "alpha": 16, "target_modules": ["q_proj", "v_proj"]}
    # A larger rate than full fine-tuning's, as LoRA uses; lora_B starts at 0, so one step moves it off.
    trainer = Trainer(real_spec(real_model_path, tmp_path, model={"lora": lora}, optim={"lr": 1e-4}), MemoryReporter())
    try:
        params = dict(trainer.model.named_parameters())
        adapters = {n for n in params if "lora_" in n}
        assert len(adapters) == 30 * 2 * 2  # layers x (q_proj, v_proj) x (A, B)
        assert {n for n, p in params.items() if p.requires_grad} == adapters
        before = {n: p.detach().clone() for n, p in params.items()}
        metrics = trainer.step().metrics
        assert math.isfinite(metrics["actor/loss"]) and metrics["actor/grad_norm"] > 0
        moved = {n for n, p in params.items() if not torch.equal(before[n], p.detach())}
    finally:
        trainer.close()
    assert moved == {n for n in adapters if "lora_B" in n}  # lora_A's gradient is 0 while lora_B is 0
