"""Scores of k samples per prompt (a suite cell's, an evaluation run's): the unbiased pass@k, and mean reward,
pass@1 and pass@k over prompts, each with a percentile bootstrap interval over prompts (prompts resampled
with replacement; the samples of a prompt stay together, so the interval reflects how many prompts were
evaluated, not how many samples each had)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c pass: 1 - C(n-c, k) / C(n, k)
    (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", arXiv:2107.03374, eq. 1)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_ks(n: int) -> list[int]:
    """k values to report for n samples: 1, 2, 4, ... up to n, and n itself."""
    ks = [k for k in (2**i for i in range(n.bit_length())) if k <= n]
    return ks if ks[-1] == n else [*ks, n]


@dataclass(frozen=True)
class Estimate:
    """A mean over prompts and its bootstrap interval [low, high]."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class CellScores:
    """One (model, task) pair's scores over `num_prompts` prompts of `k` samples each."""

    num_prompts: int
    k: int
    reward_mean: Estimate
    pass_at_1: Estimate
    pass_at_k: Estimate

    def metrics(self, prefix: str) -> dict[str, float]:
        """`<prefix>/reward_mean`, `<prefix>/pass@1`, `<prefix>/pass@<k>`, each with `_low` and `_high`."""
        out: dict[str, float] = {}
        for name, estimate in (("reward_mean", self.reward_mean), ("pass@1", self.pass_at_1),
                               (f"pass@{self.k}", self.pass_at_k)):  # fmt: skip
            out[f"{prefix}/{name}"] = estimate.value
            out[f"{prefix}/{name}_low"] = estimate.low
            out[f"{prefix}/{name}_high"] = estimate.high
        return out

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RewardEstimate:
    """The mean reward over prompts alone (samples without a pass verdict)."""

    num_prompts: int
    reward_mean: Estimate

    def metrics(self, prefix: str) -> dict[str, float]:
        e = self.reward_mean
        return {
            f"{prefix}/reward_mean": e.value,
            f"{prefix}/reward_mean_low": e.low,
            f"{prefix}/reward_mean_high": e.high,
        }


def reward_estimate(
    rewards: Sequence[Sequence[float]], *, resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> RewardEstimate:
    """Mean reward over prompts with its bootstrap interval (as `cell_scores`, the same draws for its mean)."""
    (mean,) = bootstrap_means([[float(np.mean(r)) for r in rewards]], resamples=resamples, confidence=confidence,
                              seed=seed)  # fmt: skip
    return RewardEstimate(len(rewards), mean)


def bootstrap_means(
    columns: Sequence[Sequence[float]], *, resamples: int, confidence: float, seed: int
) -> list[Estimate]:
    """For each column of per-prompt values (all of one length n): its mean and the percentile bootstrap
    interval of the mean at `confidence`, from `resamples` resamples of the n prompts drawn with numpy's
    default generator seeded by `seed`. The columns share the resamples (a paired bootstrap), so the same
    seed gives the same interval for the same values."""
    values = np.asarray(columns, dtype=float)
    n = values.shape[1]
    if n == 0:
        raise ValueError("no prompts to bootstrap over")
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    tail = (1 - confidence) / 2
    out = []
    for column in values:
        means = column[picks].mean(axis=1)
        low, high = np.quantile(means, [tail, 1 - tail])
        out.append(Estimate(float(column.mean()), float(low), float(high)))
    return out


def cell_scores(
    rewards: Sequence[Sequence[float]],
    passed: Sequence[Sequence[bool]],
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> CellScores:
    """Scores of k samples per prompt: rewards[i] and passed[i] are prompt i's. Per prompt: its mean reward,
    pass@1 and pass@k (the unbiased estimates from its k samples); each averaged over prompts, with intervals."""
    if not rewards:
        raise ValueError("no prompts were evaluated")
    k = len(rewards[0])
    if any(len(r) != k for r in rewards) or [len(p) for p in passed] != [len(r) for r in rewards]:
        raise ValueError("every prompt needs the same number k of samples, with a pass verdict for each")
    per_prompt = [
        [float(np.mean(r)) for r in rewards],
        [pass_at_k(k, sum(p), 1) for p in passed],
        [pass_at_k(k, sum(p), k) for p in passed],
    ]
    mean, one, at_k = bootstrap_means(per_prompt, resamples=resamples, confidence=confidence, seed=seed)
    return CellScores(len(rewards), k, mean, one, at_k)
