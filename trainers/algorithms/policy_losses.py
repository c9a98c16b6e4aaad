"""Policy losses: per-token logprobs and advantages -> the scalar surrogate loss to minimise.

Every entry of `POLICY_LOSSES` has the one signature (as verl's `core_algos`)::

    fn(logp, old_logp, advantages, mask, *, clip_ratio_low, clip_ratio_high, dual_clip_c,
       loss_agg_mode, loss_agg_norm, is_weights=None, selection=None) -> PolicyLossOutput

    logp        (B, T) float  log pi_theta of the sampled tokens (with gradient).
    old_logp    (B, T) float  log pi_theta_old: the policy that sampled, as recomputed by the trainer.
    advantages  (B, T) float  from `trainers.algorithms.advantages`.
    mask        (B, T)        1 on tokens that count in the loss.
    clip_ratio_low / clip_ratio_high   the ratio is clipped to [1 - low, 1 + high].
    dual_clip_c   float | None  dual-clip bound for negative advantages (> 1); None disables.
    loss_agg_mode, loss_agg_norm   passed to `aggregate_loss`.
    is_weights  (B, T) float | None  truncated importance-sampling weights correcting for the
                gap between the rollout engine's and the trainer's logprobs (e.g. vLLM);
                multiplied into the per-token loss, never differentiated.
    selection   `TokenSelection` | None  tokens chosen over the whole step (`token_selection`):
                Clip-Cov cuts their gradient, KL-Cov adds its KL term to them; the other
                entries take none.

Values at masked positions reach neither the loss nor its gradient. Diagnostics
are computed under `no_grad` as token means over valid tokens.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from trainers.algorithms.aggregation import aggregate_loss
from trainers.algorithms.masked import masked_mean, zero_masked
from trainers.algorithms.token_selection import TokenSelection
from trainers.registry import Registry

# exp() of a per-token log-ratio beyond +-20 overflows half precision and means the
# sample is useless anyway (verl clamps at the same bound).
LOG_RATIO_BOUND = 20.0
# GSPO's sequence log-ratio is clamped above at 10 (verl `compute_policy_loss_gspo`).
GSPO_LOG_RATIO_MAX = 10.0


@dataclass(frozen=True)
class PolicyLossOutput:
    """The loss to backpropagate and its diagnostics (0-dim tensors; diagnostics detached).

    clip_frac_low   fraction of valid tokens whose ratio was clipped at 1 - low (negative advantage)
    clip_frac_high  fraction clipped at 1 + high (positive advantage)
    dual_clip_frac  fraction held at the dual-clip bound c (negative advantage, ratio > c)
    ppo_kl          approx KL(pi_old || pi_theta) = mean(old_logp - logp) (k1)
    ratio_mean      mean importance ratio pi_theta / pi_old
    """

    loss: Tensor
    clip_frac_low: Tensor
    clip_frac_high: Tensor
    dual_clip_frac: Tensor
    ppo_kl: Tensor
    ratio_mean: Tensor

    def metrics(self) -> dict[str, float]:
        """Floats under the `actor/` metric keys (one host sync)."""
        values = torch.stack(
            [
                self.loss.detach(),
                self.clip_frac_low,
                self.clip_frac_high,
                self.dual_clip_frac,
                self.ppo_kl,
                self.ratio_mean,
            ]
        ).tolist()
        keys = ["pg_loss", "clip_frac_low", "clip_frac_high", "dual_clip_frac", "ppo_kl", "ratio_mean"]
        return {f"actor/{key}": value for key, value in zip(keys, values, strict=True)}


PolicyLossFn = Callable[..., PolicyLossOutput]

POLICY_LOSSES: Registry[PolicyLossFn] = Registry("policy loss")


@dataclass(frozen=True)
class Clip:
    """The clip settings every loss is given: the ratio is clipped to [1 - low, 1 + high]; `dual_c` caps
    a negative-advantage token's loss (None: off)."""

    low: float
    high: float
    dual_c: float | None


# A loss's per-token form: (logp, old_logp, advantages zeroed off the mask, mask, clip, selection) ->
# ((B, T) per-token loss, diagnostics with a placeholder loss).
TokenLoss = Callable[[Tensor, Tensor, Tensor, Tensor, Clip, TokenSelection | None], tuple[Tensor, PolicyLossOutput]]


def policy_loss(name: str) -> Callable[[TokenLoss], PolicyLossFn]:
    """Registers a loss written per token under `name`, with the one signature of every entry: its
    advantages zeroed off the mask, its per-token loss times the importance-sampling weights (if any),
    then aggregated by `loss_agg_mode`. The entry keeps the per-token function's name and docstring."""

    def register(token_loss: TokenLoss) -> PolicyLossFn:
        @functools.wraps(token_loss)
        def loss(
            logp: Tensor,
            old_logp: Tensor,
            advantages: Tensor,
            mask: Tensor,
            *,
            clip_ratio_low: float,
            clip_ratio_high: float,
            dual_clip_c: float | None,
            loss_agg_mode: str,
            loss_agg_norm: int | None,
            is_weights: Tensor | None = None,
            selection: TokenSelection | None = None,
        ) -> PolicyLossOutput:
            clip = Clip(clip_ratio_low, clip_ratio_high, dual_clip_c)
            pg_loss, out = token_loss(logp, old_logp, zero_masked(advantages, mask), mask, clip, selection)
            weighted = _weighted(pg_loss, is_weights, mask)
            return replace(out, loss=aggregate_loss(weighted, mask, loss_agg_mode, loss_agg_norm))

        return POLICY_LOSSES.register(name)(loss)

    return register


def _clipped_diagnostics(
    ratio: Tensor, advantages: Tensor, mask: Tensor, low: float, high: float
) -> tuple[Tensor, Tensor]:
    """(clip_frac_low, clip_frac_high): tokens where the clipped term is the one in force."""
    with torch.no_grad():
        clipped_low = (ratio < 1 - low) & (advantages < 0)
        clipped_high = (ratio > 1 + high) & (advantages > 0)
        return masked_mean(clipped_low.float(), mask), masked_mean(clipped_high.float(), mask)


def _ratio_diagnostics(log_ratio: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """(ppo_kl, ratio_mean) of a per-token log-ratio log pi_theta - log pi_old."""
    with torch.no_grad():
        return masked_mean(-log_ratio, mask), masked_mean(log_ratio.exp(), mask)


def _weighted(pg_loss: Tensor, is_weights: Tensor | None, mask: Tensor) -> Tensor:
    """The per-token loss times the (detached) importance-sampling weights, if any."""
    if is_weights is None:
        return pg_loss
    return pg_loss * zero_masked(is_weights.detach(), mask)


def _log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """(B, T) log pi_theta - log pi_old, 0 off the mask, bounded to +-LOG_RATIO_BOUND."""
    return zero_masked(logp - old_logp, mask).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def _clipped_surrogate(ratio: Tensor, advantages: Tensor, clip: Clip) -> Tensor:
    """(B, T) PPO's clipped surrogate to minimise: max(-A * ratio, -A * clip(ratio, 1 - low, 1 + high))."""
    return torch.maximum(-advantages * ratio, -advantages * ratio.clamp(1 - clip.low, 1 + clip.high))


def _unclipped_output(pg_loss: Tensor, log_ratio: Tensor, mask: Tensor) -> tuple[Tensor, PolicyLossOutput]:
    """A loss without a clip: its diagnostics say nothing was clipped."""
    zero = torch.zeros((), device=pg_loss.device)
    return pg_loss, PolicyLossOutput(zero, zero, zero, zero, *_ratio_diagnostics(log_ratio, mask))


@policy_loss("ppo_clip")
def ppo_clip_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, clip: Clip, selection: TokenSelection | None
) -> tuple[Tensor, PolicyLossOutput]:
    """PPO clipped surrogate, per token: max(-A * ratio, -A * clip(ratio, 1 - low, 1 + high)).

    PPO (arXiv:1707.06347, eq. 7) with decoupled bounds, "clip-higher" (DAPO,
    arXiv:2503.14476, section 3.1). With `dual_clip_c`, the loss of a negative-advantage
    token is also capped at -A * c, so a huge ratio cannot blow it up (Dual-clip PPO,
    arXiv:1912.09729, eq. 5; as verl's `clip_ratio_c`).
    """
    log_ratio = _log_ratio(logp, old_logp, mask)  # (B, T)
    ratio = log_ratio.exp()
    pg_loss = _clipped_surrogate(ratio, advantages, clip)  # (B, T)
    dual_clip_frac = torch.zeros((), device=logp.device)
    if clip.dual_c is not None:
        pg_loss_dual = -advantages * clip.dual_c
        pg_loss = torch.where(advantages < 0, torch.minimum(pg_loss, pg_loss_dual), pg_loss)
        with torch.no_grad():
            dual_clip_frac = masked_mean(((advantages < 0) & (ratio > clip.dual_c)).float(), mask)
    clip_frac_low, clip_frac_high = _clipped_diagnostics(ratio, advantages, mask, clip.low, clip.high)
    diagnostics = PolicyLossOutput(
        pg_loss.new_zeros(()), clip_frac_low, clip_frac_high, dual_clip_frac, *_ratio_diagnostics(log_ratio, mask)
    )
    return pg_loss, diagnostics


@policy_loss("gspo")
def gspo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, clip: Clip, selection: TokenSelection | None
) -> tuple[Tensor, PolicyLossOutput]:
    """GSPO: the PPO clip applied to one length-normalised ratio per sequence.

    s_i = exp(mean_t(logp - old_logp)) = (pi_theta(y_i) / pi_old(y_i))^(1/|y_i|), used in the
    token-level form s_i,t = sg[s_i] * pi_theta(y_i,t) / sg[pi_theta(y_i,t)] (GSPO,
    arXiv:2507.18071, eqs. 5-7 and 10-11; as verl's `compute_policy_loss_gspo`): every token
    of a sequence has the value s_i and, with per-sequence advantages and seq-mean-token-mean
    aggregation (the paper's objective and the preset), the gradient of sequence-level GSPO.
    Unlike verl, `loss_agg_mode` is honoured rather than forced. `dual_clip_c` is not used:
    the paper's clip range is already tight (3e-4 / 4e-4).
    """
    log_ratio = zero_masked(logp - old_logp, mask)  # (B, T); unbounded: the sequence mean is bounded below
    seq_log_ratio = masked_mean(log_ratio, mask, dim=-1)  # (B,) log s_i
    logp_valid = zero_masked(logp, mask)
    log_seq_ratio = logp_valid - logp_valid.detach() + seq_log_ratio.detach().unsqueeze(-1)  # (B, T) log s_i,t
    seq_ratio = zero_masked(log_seq_ratio.clamp(max=GSPO_LOG_RATIO_MAX).exp(), mask)
    pg_loss = _clipped_surrogate(seq_ratio, advantages, clip)  # (B, T)
    clip_frac_low, clip_frac_high = _clipped_diagnostics(seq_ratio, advantages, mask, clip.low, clip.high)
    ppo_kl, _ = _ratio_diagnostics(log_ratio, mask)
    with torch.no_grad():
        ratio_mean = masked_mean(seq_ratio, mask)
    zero = torch.zeros((), device=logp.device)
    return pg_loss, PolicyLossOutput(zero, clip_frac_low, clip_frac_high, zero, ppo_kl, ratio_mean)


@policy_loss("vanilla_pg")
def vanilla_pg_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, clip: Clip, selection: TokenSelection | None
) -> tuple[Tensor, PolicyLossOutput]:
    """REINFORCE: -A * log pi_theta per token, no ratio, no clip (Williams 1992).

    On-policy its gradient equals PPO's; it is the plain reference the others are checked
    against. `old_logp` only feeds the diagnostics; the clip settings are not used.
    """
    return _unclipped_output(-advantages * zero_masked(logp, mask), _log_ratio(logp, old_logp, mask), mask)


def _needs_selection(name: str, selection: TokenSelection | None) -> TokenSelection:
    if selection is None:
        raise ValueError(f"policy loss {name!r} needs the step's token selection (trainers.update.selection)")
    return selection


@policy_loss("clip_cov")
def clip_cov_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, clip: Clip, selection: TokenSelection | None
) -> tuple[Tensor, PolicyLossOutput]:
    """Clip-Cov: `ppo_clip` with the loss of the selected tokens set to 0 (no gradient); they still
    count in the aggregation's denominator, as the reference's `corr` mask.

    The Entropy Mechanism of RL for Reasoning LMs (arXiv:2505.22617, section 5.2), as
    PRIME-RL/Entropy-Mechanism-of-RL's `compute_policy_loss_clip_cov`. The selection (a random
    share of the tokens with lb < Cov < ub that the clip has not cut, `token_selection`) is made
    over the whole step here, per micro-batch there. `dual_clip_c` applies as in `ppo_clip` (the
    reference has none). clip_frac_low / clip_frac_high count the PPO clip; the share of tokens
    cut by the selection is the selection's metric (`actor/cov_selected_frac`).
    """
    cut = _needs_selection("clip_cov", selection).selected
    # ppo_clip's per-token form (functools.wraps keeps it as __wrapped__), before the shared tail.
    pg_loss, out = ppo_clip_loss.__wrapped__(logp, old_logp, advantages, mask, clip, selection)
    return torch.where(cut, torch.zeros_like(pg_loss), pg_loss), out


@policy_loss("kl_cov")
def kl_cov_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, clip: Clip, selection: TokenSelection | None
) -> tuple[Tensor, PolicyLossOutput]:
    """KL-Cov: -A * ratio on every token (no clip), plus beta * |log pi - log pi_old| on the selected
    tokens (the top share by Cov, `token_selection`; beta = `selection.kl_coef`).

    The Entropy Mechanism of RL for Reasoning LMs (arXiv:2505.22617, section 5.2), as
    PRIME-RL/Entropy-Mechanism-of-RL's `compute_policy_loss_kl_cov` (its `ppo_kl_coef`, and its
    KL, the absolute log-ratio). The clip settings are not used (the reference has none); the
    selection is made over the whole step here, per micro-batch there.
    """
    chosen = _needs_selection("kl_cov", selection)
    log_ratio = _log_ratio(logp, old_logp, mask)  # (B, T)
    pg_loss = -advantages * log_ratio.exp()
    pg_loss = pg_loss + torch.where(chosen.selected, chosen.kl_coef * log_ratio.abs(), torch.zeros_like(pg_loss))
    return _unclipped_output(pg_loss, log_ratio, mask)
