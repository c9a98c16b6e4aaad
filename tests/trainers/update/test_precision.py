"""Mixed precision (`optim.precision`): bfloat16 autocast against float32 on the same work."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.trainers.helpers import tiny_spec
from trainers.algorithms.policy_losses import POLICY_LOSSES
from trainers.report import MemoryReporter
from trainers.run.loop import train
from trainers.update.batches import TokenBatch
from trainers.update.logprobs import token_logprobs
from trainers.update.precision import autocast

# The stated tolerances of bfloat16 autocast against float32 on the tiny model (bfloat16 keeps
# 8 significant bits, a relative error of 2^-9 per rounding). Measured on this batch: loss
# 2.3e-5, logprob 0.0043 at most, gradient 0.7 % of its norm.
LOSS_TOLERANCE = 2e-3  # absolute, on a token-mean REINFORCE loss
LOGPROB_TOLERANCE = 0.02  # absolute, per token
GRADIENT_TOLERANCE = 0.05  # |g_bf16 - g_fp32| / |g_fp32|


def fixed_batch() -> tuple[TokenBatch, torch.Tensor]:
    """8 sequences, prompts of 4-19 and completions of 1-47 random tokens, and random advantages."""
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(7, 700, (int(n),), generator=g).tolist() for n in torch.randint(4, 20, (8,), generator=g)]
    completions = [
        torch.randint(7, 700, (int(n),), generator=g).tolist() for n in torch.randint(1, 48, (8,), generator=g)
    ]
    batch = TokenBatch.build(prompts, completions, pad_id=0)
    return batch, torch.randn(batch.completion_mask.shape, generator=g)


def loss_logprobs_and_gradient(model, batch, advantages, precision):
    model.zero_grad(set_to_none=True)
    with autocast(model, precision):
        logp, _ = token_logprobs(model, batch, with_entropy=True, chunk_tokens=64)
    out = POLICY_LOSSES.get("vanilla_pg")(
        logp, logp.detach(), advantages, batch.completion_mask, clip_ratio_low=0.2, clip_ratio_high=0.2,
        dual_clip_c=None, loss_agg_mode="token-mean", loss_agg_norm=None,
    )  # fmt: skip
    out.loss.backward()
    assert logp.dtype == torch.float32  # the logprob and loss math stays float32
    return out.loss.item(), logp.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])


def test_bfloat16_autocast_stays_within_the_stated_tolerance_of_float32(tiny_model_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path).train()
    batch, advantages = fixed_batch()
    real = batch.completion_mask.bool()
    loss32, logp32, grad32 = loss_logprobs_and_gradient(model, batch, advantages, "float32")
    loss16, logp16, grad16 = loss_logprobs_and_gradient(model, batch, advantages, "bfloat16")
    assert next(model.parameters()).dtype == torch.float32  # master weights untouched
    assert (logp16 - logp32)[real].abs().max() > 0  # bfloat16 really ran
    assert abs(loss16 - loss32) < LOSS_TOLERANCE
    assert (logp16 - logp32)[real].abs().max() < LOGPROB_TOLERANCE
    assert (grad16 - grad32).norm() / grad32.norm() < GRADIENT_TOLERANCE


def test_autocast_refuses_an_unknown_precision(tiny_model_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    with pytest.raises(ValueError, match="float16"):
        autocast(model, "float16")


def test_a_bfloat16_run_trains_and_reports_close_to_a_float32_run(tiny_model_path, tmp_path):
    metrics = {}
    for precision in ("float32", "bfloat16"):
        reporter = MemoryReporter()
        spec = tiny_spec(
            tiny_model_path,
            tmp_path / precision,
            optim={"total_steps": 1, "precision": precision, "logprob_chunk_mib": 0.03},
        )
        assert train(spec, reporter).status == "succeeded"
        metrics[precision] = reporter.metric_points[0][1]
    entropy32, entropy16 = metrics["float32"]["actor/entropy"], metrics["bfloat16"]["actor/entropy"]
    assert entropy16 != entropy32  # the training forward ran under autocast
    assert entropy16 == pytest.approx(entropy32, abs=LOGPROB_TOLERANCE)
