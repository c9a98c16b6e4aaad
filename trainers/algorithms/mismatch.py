"""When the sampler is not the trainer: measuring and correcting their logprob mismatch.

vLLM samples with its own kernels (and often another dtype), so the logprob it reports
for a sampled token differs from the trainer's forward pass on the same weights; an
asynchronous run (trainers.run.pipeline) also trains on tokens sampled by older weights.
The policy ratio always uses the trainer's own logprobs; these functions report the gap
and, optionally, reweight the loss by truncated importance sampling (TIS, Yao et al.,
"Your Efficient RL Framework Secretly Brings You Off-Policy RL Training", 2025,
https://fengyao.notion.site/off-policy-rl) or another entry of `OFF_POLICY_CORRECTIONS`.

Shapes: (B, T) over response tokens; `mask` is 1 on tokens that count.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from trainers.algorithms.masked import masked_mean, masked_sum, zero_masked
from trainers.registry import Registry

# exp() of a log-ratio beyond this overflows half precision and means the token (or sequence)
# says nothing about the current policy anyway (as policy_losses.LOG_RATIO_BOUND).
LOG_RATIO_BOUND = 20.0


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


# ---------------------------------------------------------------- off-policy corrections


@dataclass(frozen=True)
class Correction:
    """Per-token importance weights for the policy loss (`is_weights`) and what they did.

    weights          (B, T) detached, 0 on masked tokens and on tokens the correction rejected.
    weight_mean      mean weight over valid tokens (rejected ones count as 0).
    truncated_frac   share of valid tokens whose weight was cut to the cap (truncation).
    rejected_frac    share of valid tokens whose weight was set to 0 (masking).
    """

    weights: Tensor
    weight_mean: float
    truncated_frac: float = 0.0
    rejected_frac: float = 0.0

    @classmethod
    def of(cls, weights: Tensor, mask: Tensor, *, truncated: Tensor | None = None,
           rejected: Tensor | None = None) -> Correction:  # fmt: skip
        """The correction from its weights and the (B, T) booleans of truncated / rejected tokens."""
        return cls(
            zero_masked(weights, mask),
            masked_mean(weights.float(), mask).item(),
            _frac(truncated, mask) if truncated is not None else 0.0,
            _frac(rejected, mask) if rejected is not None else 0.0,
        )

    def metrics(self) -> dict[str, float]:
        """`correction/weight_mean|truncated_frac|rejected_frac`."""
        return {
            "correction/weight_mean": self.weight_mean,
            "correction/truncated_frac": self.truncated_frac,
            "correction/rejected_frac": self.rejected_frac,
        }


CorrectionFn = Callable[..., Correction]

# Every entry has the one signature
#
#     fn(prox_logp, behav_logp, mask, *, low, high) -> Correction
#
#     prox_logp   (B, T)  log pi_prox: the trainer's logprob of each sampled token under the weights the step
#                         starts from (the "proximal" policy of decoupled PPO, `old_logp` of the policy loss).
#     behav_logp  (B, T)  log pi_behav: the engine's logprob of the token when it was sampled, by whatever
#                         weights sampled it (an older version in an asynchronous run: each token its own).
#     mask        (B, T)  1 on tokens that count.
#     low, high   float   the band [low, high] of the ratio r = pi_prox / pi_behav that a correction keeps or
#                         truncates to (`algorithm.correction_low|high`); entries that need no lower bound
#                         ignore `low`.
#
# The weights multiply the per-token loss of the policy loss whose ratio is pi_theta / pi_prox, so the
# clip keeps the update near the proximal policy and the weight corrects for who sampled (decoupled PPO,
# Hilton et al. arXiv:2110.00641; AReaL arXiv:2505.24298 eq. 5). A rejected token's weight is 0: it stays
# in the aggregation's denominator (the loss equals the single-process loss on the same batch either way).
OFF_POLICY_CORRECTIONS: Registry[CorrectionFn] = Registry("off-policy correction")


def _token_log_ratio(prox_logp: Tensor, behav_logp: Tensor, mask: Tensor) -> Tensor:
    """(B, T) log(pi_prox / pi_behav), 0 at masked positions, clamped to +-LOG_RATIO_BOUND."""
    log_ratio = zero_masked(prox_logp.float() - behav_logp.float(), mask)
    return log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def _frac(hit: Tensor, mask: Tensor) -> float:
    """Share of valid tokens where `hit` (B, T) is set."""
    return masked_mean(hit.float(), mask).item()


def _per_sequence(values: Tensor, mask: Tensor) -> Tensor:
    """(B,) -> (B, T): each sequence's value on each of its valid tokens, 0 elsewhere."""
    return zero_masked(values.unsqueeze(-1).expand(mask.shape), mask)


@OFF_POLICY_CORRECTIONS.register("decoupled")
@torch.no_grad()
def decoupled_weights(prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, *, low: float, high: float) -> Correction:
    """Decoupled PPO: w_t = pi_prox / pi_behav, untruncated (AReaL, arXiv:2505.24298 eq. 5). Unbiased, but a
    token the sampler found unlikely and the trainer does not can weigh a lot: `mis` is this with a cap."""
    return Correction.of(_token_log_ratio(prox_logp, behav_logp, mask).exp(), mask)


@OFF_POLICY_CORRECTIONS.register("tis")
@torch.no_grad()
def tis_token_weights(prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, *, low: float, high: float) -> Correction:
    """Token-level truncated IS: w_t = min(r_t, high) (Yao et al. 2025, as `tis_weights`)."""
    truncated = _token_log_ratio(prox_logp, behav_logp, mask) > math.log(high)
    return Correction.of(tis_weights(prox_logp, behav_logp, mask, high), mask, truncated=truncated)


@OFF_POLICY_CORRECTIONS.register("seq_tis")
@torch.no_grad()
def tis_sequence_weights(prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, *, low: float, high: float) -> Correction:
    """Sequence-level truncated IS: every token of sequence i weighs w_i = min(prod_t r_t, high), the
    sequence's likelihood ratio (Yao et al. 2025; as verl's rollout_is="sequence")."""
    seq_log_ratio = masked_sum(_token_log_ratio(prox_logp, behav_logp, mask), mask, dim=-1)  # (B,)
    seq_log_ratio = seq_log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    truncated = _per_sequence(seq_log_ratio > math.log(high), mask)
    return Correction.of(_per_sequence(seq_log_ratio.exp().clamp(max=high), mask), mask, truncated=truncated)


@OFF_POLICY_CORRECTIONS.register("mis")
@torch.no_grad()
def mis_token_weights(prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, *, low: float, high: float) -> Correction:
    """Token-level masked IS: w_t = r_t where r_t <= high, 0 above: a token the sampler was far less sure of
    than the trainer is dropped rather than cut down (Liu et al., "When Speed Kills Stability", 2025)."""
    ratio = _token_log_ratio(prox_logp, behav_logp, mask).exp()
    rejected = ratio > high
    return Correction.of(torch.where(rejected, torch.zeros_like(ratio), ratio), mask, rejected=rejected)


@OFF_POLICY_CORRECTIONS.register("seq_mis")
@torch.no_grad()
def mis_sequence_weights(prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, *, low: float, high: float) -> Correction:
    """Sequence-level masked IS: every token of sequence i weighs R_i = prod_t r_t where R_i <= high, and
    the whole sequence weighs 0 above (Liu et al. 2025, "Seq-MIS")."""
    seq_log_ratio = masked_sum(_token_log_ratio(prox_logp, behav_logp, mask), mask, dim=-1)  # (B,)
    seq_log_ratio = seq_log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    rejected = seq_log_ratio > math.log(high)  # (B,)
    kept = torch.where(rejected, torch.zeros_like(seq_log_ratio), seq_log_ratio.exp())
    return Correction.of(_per_sequence(kept, mask), mask, rejected=_per_sequence(rejected, mask))


@OFF_POLICY_CORRECTIONS.register("icepop")
@torch.no_grad()
def icepop_token_weights(prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, *, low: float, high: float) -> Correction:
    """IcePop: w_t = r_t where low <= r_t <= high, 0 outside the band: tokens on which trainer and sampler
    disagree in either direction carry no gradient (Ling team, "Every Step Evolves", arXiv:2510.18855)."""
    ratio = _token_log_ratio(prox_logp, behav_logp, mask).exp()
    rejected = (ratio < low) | (ratio > high)
    return Correction.of(torch.where(rejected, torch.zeros_like(ratio), ratio), mask, rejected=rejected)


@OFF_POLICY_CORRECTIONS.register("seq_icepop")
@torch.no_grad()
def icepop_sequence_weights(
    prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, *, low: float, high: float
) -> Correction:
    """IcePop's band on each sequence's geometric-mean ratio G_i = exp(mean_t log r_t) (length-normalised,
    as GSPO's ratio, so one bound suits short and long sequences): every token of sequence i weighs G_i
    where low <= G_i <= high, and the whole sequence 0 outside (as verl's geometric rejection sampling)."""
    geo_log_ratio = masked_mean(_token_log_ratio(prox_logp, behav_logp, mask), mask, dim=-1)  # (B,)
    geo = geo_log_ratio.exp()
    rejected = (geo < low) | (geo > high)  # (B,)
    kept = torch.where(rejected, torch.zeros_like(geo), geo)
    return Correction.of(_per_sequence(kept, mask), mask, rejected=_per_sequence(rejected, mask))
