"""On-policy distillation: a teacher's logprobs of the student's sampled tokens -> a per-token advantage term.

The student samples; the teacher scores every sampled token; the per-token reverse KL estimate on the
sampled token, log pi_student(y_t) - log pi_teacher(y_t), is the signal (a one-sample estimate of
KL(pi_student || pi_teacher) at that position, unbiased because y_t is drawn from the student). As in
Thinking Machines' "On-Policy Distillation" (Lu et al., 2025) and Tinker's cookbook
(`incorporate_kl_penalty`), the advantage of token t gains -coef * reverse_kl_t, undiscounted, beside the
rubric's advantage times `reward_weight` (0: pure distillation). GKD (Agarwal et al., arXiv:2306.13649) is
the same objective with the full-vocabulary divergence; TRL's GKD trainer computes that one from both
models' logits.

Every entry of `DISTILL_SIGNALS` has the one signature::

    fn(student_logp, teacher_logp, mask) -> signal
        student_logp, teacher_logp (B, T) float: log-probabilities of the sampled tokens under the student
        (the policy that sampled them) and the teacher; mask (B, T) 1 on the tokens a teacher scored;
        signal (B, T), the per-token term the advantage gains -coef times (0 off the mask).

The metrics and the inspector always show the plain reverse KL (`reverse_kl`), whichever signal trains.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from trainers.algorithms.masked import masked_mean, zero_masked
from trainers.registry import Registry

DistillFn = Callable[[Tensor, Tensor], Tensor]

DISTILL_SIGNALS: Registry[DistillFn] = Registry("distillation signal")


@DISTILL_SIGNALS.register("reverse_kl")
def reverse_kl(student_logp: Tensor, teacher_logp: Tensor, mask: Tensor) -> Tensor:
    """(B, T) log pi_student(y_t) - log pi_teacher(y_t): positive where the student puts more mass on its
    sample than the teacher would, 0 where they agree."""
    return zero_masked(student_logp - teacher_logp, mask)


@DISTILL_SIGNALS.register("reverse_kl_centered")
def reverse_kl_centered(student_logp: Tensor, teacher_logp: Tensor, mask: Tensor) -> Tensor:
    """(B, T) the reverse KL less its mean over the batch's scored tokens: a constant baseline, which leaves
    the expected gradient as it is (E[grad log pi] = 0) and removes the push on every sampled token that a
    reverse KL of one sign everywhere gives (a student far from its teacher: every token's KL is large)."""
    kl = zero_masked(student_logp - teacher_logp, mask)
    return zero_masked(kl - masked_mean(kl, mask), mask)


@torch.no_grad()
def teacher_mean(signals: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """((B, T) the weighted mean of the teachers' signals per row, (B,) whether any teacher scored the row).

    signals (K, B, T): teacher k's signal on every row (any value where it did not score the row);
    weights (K, B): teacher k's weight on row b, 0 where it does not score it. A row no teacher scores
    gets 0 (no distillation term)."""
    total = weights.sum(0)  # (B,)
    covered = total > 0
    mean = (signals * weights.unsqueeze(-1)).sum(0) / total.clamp(min=1e-12).unsqueeze(-1)  # (B, T)
    return torch.where(covered.unsqueeze(-1), mean, torch.zeros_like(mean)), covered


@torch.no_grad()
def distilled_advantages(
    advantages: Tensor, signal: Tensor, mask: Tensor, *, coef: float, reward_weight: float
) -> Tensor:
    """(B, T) A_t = reward_weight * A_rubric_t - coef * signal_t on valid tokens, 0 elsewhere.

    advantages (B, T) the estimator's advantages from the rubric's rewards; signal (B, T) the per-token
    divergence (`DISTILL_SIGNALS`); mask (B, T) 1 on sampled (trained) tokens."""
    return zero_masked(reward_weight * advantages - coef * signal, mask)
