"""When the sampler is not the trainer: measuring and correcting their logprob mismatch.

vLLM samples with its own kernels (and often another dtype), so the logprob it reports
for a sampled token differs from the trainer's forward pass on the same weights. The
policy ratio always uses the trainer's own logprobs; these functions report the gap
and, optionally, reweight the loss by truncated importance sampling (TIS, Yao et al.,
"Your Efficient RL Framework Secretly Brings You Off-Policy RL Training", 2025,
https://fengyao.notion.site/off-policy-rl).

Shapes: (B, T) over response tokens; `mask` is 1 on tokens that count.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainers.algorithms.masked import masked_mean, zero_masked


@torch.no_grad()
def logprob_gap(engine_logp: Tensor, trainer_logp: Tensor, mask: Tensor) -> dict[str, float]:
    """`rollout/logprob_gap_mean|max`: |engine - trainer| logprob per response token.

    Also `rollout/engine_trainer_kl`, the k3 estimate of KL(engine || trainer) on the
    sampled tokens (>= 0, 0 when they agree): the number to watch for drift."""
    keep = mask.bool()
    if not keep.any():
        return {"rollout/logprob_gap_mean": 0.0, "rollout/logprob_gap_max": 0.0, "rollout/engine_trainer_kl": 0.0}
    delta = zero_masked(trainer_logp.float() - engine_logp.float(), mask)  # (B, T) log(p_trainer / p_engine)
    gap = delta.abs()
    k3 = torch.expm1(delta) - delta  # (B, T) ratio - 1 - log ratio, 0 at masked positions
    return {
        "rollout/logprob_gap_mean": masked_mean(gap, mask).item(),
        "rollout/logprob_gap_max": gap[keep].max().item(),
        "rollout/engine_trainer_kl": masked_mean(k3, mask).item(),
    }


@torch.no_grad()
def tis_weights(trainer_old_logp: Tensor, engine_logp: Tensor, mask: Tensor, cap: float) -> Tensor:
    """Truncated importance weights min(pi_old / pi_engine, cap) per token, 0 where masked.

    `trainer_old_logp` is the trainer's logprob of the sampled token under the weights that
    sampled it (before this step's update); the weights multiply the per-token policy loss
    (`is_weights`). Detached: they correct the estimate, they are not optimised."""
    if cap <= 0:
        raise ValueError(f"tis cap must be > 0, got {cap}")
    log_ratio = zero_masked(trainer_old_logp.float() - engine_logp.float(), mask)  # (B, T)
    weights = torch.exp(log_ratio).clamp(max=cap)
    return zero_masked(weights, mask).to(trainer_old_logp.dtype)


@torch.no_grad()
def tis_clip_frac(trainer_old_logp: Tensor, engine_logp: Tensor, mask: Tensor, cap: float) -> float:
    """`rollout/tis_clip_frac`: share of response tokens whose importance weight hit the cap."""
    log_ratio = zero_masked(trainer_old_logp.float() - engine_logp.float(), mask)
    hit = (log_ratio > torch.log(torch.tensor(cap))).to(torch.float32)
    return masked_mean(hit, mask).item()
