"""KL estimators: per-token estimates of KL(pi_theta || pi_ref) from sampled tokens' logprobs.

Every entry of `KL_ESTIMATORS` has the one signature::

    fn(logp, ref_logp) -> kl
        logp, ref_logp (B, T) float: log-probabilities of the sampled tokens under the
        policy and the reference model; kl (B, T), the estimate at every position
        (mask it with the loss aggregation).

The names follow John Schulman, "Approximating KL Divergence" (2020,
http://joschu.net/blog/kl-approx.html), with tokens sampled from pi_theta.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from trainers.registry import Registry

KlFn = Callable[[Tensor, Tensor], Tensor]

KL_ESTIMATORS: Registry[KlFn] = Registry("KL estimator")

# k3 stability bounds, as verl's `kl_penalty("low_var_kl")`: exp() of a log-ratio
# above ~20 overflows float16/bfloat16 ranges and dominates the loss; the estimate
# itself is capped at 10 so one token far from the reference cannot swamp a batch.
K3_LOG_RATIO_BOUND = 20.0
K3_MAX = 10.0


@KL_ESTIMATORS.register("k1")
def kl_k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = log pi(y) - log pi_ref(y): unbiased, high variance, can be negative."""
    return logp - ref_logp


@KL_ESTIMATORS.register("k2")
def kl_k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 = 0.5 * (log pi(y) - log pi_ref(y))^2: biased, low variance, >= 0."""
    return 0.5 * (logp - ref_logp).square()


@KL_ESTIMATORS.register("k3")
def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1: unbiased, low variance, >= 0.

    The log-ratio is clamped to +-20 and the result to at most 10 (as verl) for stability;
    within those bounds this is the exact formula. (GRPO, arXiv:2402.03300, eq. 4.)
    """
    log_ratio = (ref_logp - logp).clamp(-K3_LOG_RATIO_BOUND, K3_LOG_RATIO_BOUND)  # (B, T)
    return (log_ratio.exp() - log_ratio - 1).clamp(max=K3_MAX)


@KL_ESTIMATORS.register("abs")
def kl_abs(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """|log pi(y) - log pi_ref(y)|: biased, >= 0 (verl's "abs")."""
    return (logp - ref_logp).abs()


def kl_penalty(logp: Tensor, ref_logp: Tensor, estimator: str) -> Tensor:
    """(B, T) per-token KL estimate with the named estimator (see `KL_ESTIMATORS`)."""
    return KL_ESTIMATORS.get(estimator)(logp, ref_logp)
