"""vLLM (its CPU build here, in this process as a run uses it) on SmolLM2-135M-Instruct's real
weights, sampling in bfloat16 (`rollout.dtype`) while the trainer keeps float32 weights, as the studio's agent
demo runs: the logprobs it reports for the tokens it sampled against the trainer's forward pass on the same
weights, before any update and after each of two optimiser steps pushed to it (float32 tensors into bfloat16
parameters) by the training loop; and those two GRPO steps train the model."""

import copy
import math
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.trainers.helpers import real_spec
from trainers.algorithms.mismatch import logprob_gap
from trainers.report import MemoryReporter
from trainers.rollout.engines.base import SamplingParams
from trainers.run.loop import Trainer
from trainers.update.batches import TokenBatch

pytestmark = pytest.mark.slow

VLLM = {"engine": "vllm", "vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1}
# 1e-4 rather than a fine-tuning rate, so that two steps move the weights far enough for stale weights in
# vLLM to show in its samples.
LR = 1e-4

# |vLLM logprob - trainer logprob| per sampled token (2 prompts x 4 completions x <= 16 tokens in
# each measurement), vLLM 0.32's CPU build against the trainer on the CPU, seed 0, lr 1e-4,
# (mean, max) before any update, after one and after two pushed updates:
#   float32 trained, float32 sampled:   (7.8e-6, 3.3e-5), (9.7e-6, 4.1e-5), (9.6e-6, 3.0e-5)  other kernels only
#   bfloat16 trained, bfloat16 sampled: (0.044, 0.24),    (0.043, 0.22),    (0.034, 0.19)
#   float32 trained, bfloat16 sampled:  (0.035, 0.20),    (0.40, 3.4),      (0.31, 1.6)
# The last row is what a run with rollout.dtype reports (rollout/logprob_gap): before any update the weights
# are the packaged bfloat16 ones, exactly; after it, vLLM samples from the float32 weights rounded to
# bfloat16, and that rounding (2^-9 of each weight) moves this small model's logprobs by 0.3-0.4 nats a
# token. Against those rounded weights (the trained model cast to bfloat16, which is what vLLM holds) the
# samples after two updates measure (0.047, 0.28), and against the weights before training (0.43, 2.1): the
# bound tells pushed weights from stale ones. With float32 weights the bound would be (1e-4, 5e-4) (stale:
# 0.50, 2.7): the suite runs the mixed case only (each case costs 60-120 s of a 2-core CI run).
GAP_BOUNDS = {"float32": (1e-4, 5e-4), "bfloat16": (0.1, 0.75)}


def gap(trainer: Trainer, model, prompts: list[list[int]], groups) -> dict[str, float]:
    """`trainers.algorithms.mismatch.logprob_gap` of vLLM's sampled-token logprobs against `model`'s,
    computed as the loop computes its no-grad logprobs (`trainers.update.frozen.FrozenLogprobs`)."""
    flat = [g for group in groups for g in group]
    batch = TokenBatch.build([p for p, group in zip(prompts, groups, strict=True) for _ in group],
                             [g.token_ids for g in flat], pad_id=trainer.lockstep.pad_id, device=trainer.device)  # fmt: skip
    engine = torch.zeros_like(batch.completion_mask)
    for i, g in enumerate(flat):
        engine[i, : len(g.logprobs)] = torch.tensor(g.logprobs)
    return logprob_gap(engine, trainer.update.frozen(model, batch)[0], batch.completion_mask)


# (model dtype: what the trainer holds, rollout dtype: what vLLM samples in)
@pytest.fixture(scope="module", params=[("float32", "bfloat16")], ids=lambda p: f"train-{p[0]}-sample-{p[1]}")
def two_pushed_updates(request, vllm_here, real_model_path, tmp_path_factory):
    """Two GRPO steps sampled by vLLM (each step's gap measured by the loop on its rollouts), then
    one more generation, which pushes the second update to vLLM, and its gap measured here against
    the trained weights as vLLM holds them (cast to its dtype) and against the weights before training."""
    model_dtype, dtype = request.param
    spec = real_spec(real_model_path, tmp_path_factory.mktemp(f"vllm-{dtype}"), model={"dtype": model_dtype},
                     optim={"lr": LR}, rollout={**VLLM, "dtype": dtype})  # fmt: skip
    trainer = Trainer(spec, MemoryReporter())
    try:
        initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
        records = [trainer.step() for _ in range(2)]
        steps = [record.metrics for record in records]
        prompts = [grp.prompt.token_ids for grp in records[-1].generated]
        groups = trainer.engine.generate(prompts, 4, SamplingParams(max_new_tokens=16, logprobs=True))
        as_sampled = copy.deepcopy(trainer.model).to(getattr(torch, dtype))
        after_two = gap(trainer, as_sampled, prompts, groups)
        start = AutoModelForCausalLM.from_pretrained(real_model_path, dtype=getattr(torch, dtype))
        stale = gap(trainer, start.to(trainer.device), prompts, groups)  # the same samples, the weights before training
        # per tensor: (its number of dimensions, the share of its elements the two steps moved)
        moved = {name: (p.dim(), (initial[name] != p.detach()).float().mean().item())
                 for name, p in trainer.model.named_parameters()}  # fmt: skip
    finally:
        trainer.close()
    return SimpleNamespace(dtype=dtype, model_dtype=model_dtype, steps=steps, after_two=after_two, stale=stale,
                           moved=moved)  # fmt: skip


def test_the_logprob_gap_stays_under_the_measured_bound_before_and_after_two_pushed_updates(two_pushed_updates):
    run = two_pushed_updates
    bound_mean, bound_max = GAP_BOUNDS[run.dtype]
    loop = [(g["rollout/logprob_gap_mean"], g["rollout/logprob_gap_max"]) for g in run.steps]
    pushed = (run.after_two["rollout/logprob_gap_mean"], run.after_two["rollout/logprob_gap_max"])
    stale = (run.stale["rollout/logprob_gap_mean"], run.stale["rollout/logprob_gap_max"])
    print(f"\ntrained in {run.model_dtype}, sampled in {run.dtype}: |logprob gap| (mean, max) the loop measured "
          f"before and after 1 update: {loop}; after 2, against the trained weights in {run.dtype}: {pushed}, "
          f"against the initial weights: {stale}")  # fmt: skip
    if torch.cuda.is_available():
        pytest.skip("the bounds were measured with vLLM's CPU build; measure CUDA kernels before bounding them")
    # Before any update the trainer's weights are the packaged ones, which the sampling dtype holds exactly.
    (first_mean, first_max), (second_mean, _) = loop
    assert 0 < first_mean < bound_mean and first_max < bound_max
    assert math.isfinite(second_mean) and second_mean > 0  # what the run reports: rounding included
    # The updates reached vLLM: its samples fit the trained weights (as it holds them) far better than the initial ones.
    assert 0 < pushed[0] < bound_mean and pushed[1] < bound_max
    assert stale[0] > 3 * pushed[0]


def test_two_grpo_steps_sampled_by_vllm_end_with_finite_losses_and_changed_weights(two_pushed_updates):
    run = two_pushed_updates
    for metrics in run.steps:
        assert math.isfinite(metrics["actor/loss"]) and math.isfinite(metrics["actor/grad_norm"])
        assert metrics["actor/grad_norm"] > 0
    matrices = [share for dim, share in run.moved.values() if dim >= 2]
    print(f"\n{run.dtype}: share of weight elements moved by 2 steps at lr {LR}, per matrix: "
          f"{min(matrices):.2f} .. {max(matrices):.2f}")  # fmt: skip
    if run.model_dtype == "float32":
        assert all(share > 0.99 for _, share in run.moved.values())  # (nearly) every element of every tensor
    else:
        # Measured: 6% to 56% of each matrix's elements, and no RMSNorm weight. Pure bfloat16 weights
        # drop an Adam step (about lr = 1e-4 here) smaller than half their spacing (2^-9 to 2^-8 of |w|):
        # only elements under about 0.03 to 0.05 in magnitude move, and none of the norms' (about 1.0).
        assert min(matrices) > 0.02
