"""Batch-level token selections: which tokens a policy loss treats apart, chosen over a whole step.

Two papers pick tokens by statistics of the batch rather than of one sequence:

- "Beyond the 80/20 Rule" (Wang et al., arXiv:2506.01939): the policy gradient only on the
  forking tokens, the top `entropy_top_ratio` (20 %) of the batch's response tokens by the
  policy's entropy. The authors' verl patch (`get_global_entropy_top_mask`) keeps the
  ceil(ratio * N) tokens of highest entropy and aggregates the policy loss over them alone;
  the KL and entropy terms keep every token.
- "The Entropy Mechanism of RL for Reasoning LMs" (Cui et al., arXiv:2505.22617; code
  PRIME-RL/Entropy-Mechanism-of-RL): each token's covariance term
  Cov_i = (log pi(y_i) - mean_j log pi(y_j)) * (A_i - mean_j A_j), means over the batch's
  valid tokens. Clip-Cov cuts the gradient of a random r * N of the tokens with
  lb < Cov < ub (r = 2e-4, lb = 1, ub = 5) that the PPO clip has not cut already; KL-Cov
  adds beta * |log pi - log pi_old| to the loss of the top max(1, floor(k * N)) tokens by Cov
  (k = 2e-3, beta = 1) and uses the unclipped ratio.

The functions below are the selections on given values, pure. The thresholds are computed
from the values of every token of the step (`top_share_threshold`, `bottom_count_threshold`):
the caller gathers them over processes, so a token is picked or not whatever process holds it
(`trainers.update.selection`). Selections are constants of the loss (computed without gradient).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from trainers.algorithms.masked import zero_masked


@dataclass(frozen=True)
class TokenSelection:
    """The tokens a policy loss treats apart (`clip_cov`: gradient cut; `kl_cov`: KL term added),
    and the KL-Cov coefficient. `selected` is (B, T) bool, False on masked positions."""

    selected: Tensor
    kl_coef: float = 0.0

    def rows(self, rows: slice | Tensor, columns: int) -> TokenSelection:
        """The selection of `rows`, cut to `columns` (a micro-batch)."""
        return TokenSelection(self.selected[rows, :columns], self.kl_coef)


def top_count(n: int, ratio: float, *, ceil: bool) -> int:
    """How many of `n` tokens a share `ratio` keeps: at least 1 (when n > 0), at most n. The 80/20
    patch rounds up (ceil); Clip-Cov and KL-Cov round down (int())."""
    if n == 0:
        return 0
    k = math.ceil(n * ratio - 1e-9) if ceil else int(n * ratio)
    return min(n, max(1, k))


def top_share_threshold(values: Tensor, ratio: float, *, ceil: bool) -> Tensor:
    """The k-th largest of `values` (N,), k = `top_count(N, ratio)`: tokens at or above it are the
    top share. +inf for no values (nothing is selected)."""
    k = top_count(values.numel(), ratio, ceil=ceil)
    if k == 0:
        return torch.tensor(math.inf, device=values.device)
    return torch.topk(values.float(), k).values[-1]


def bottom_count_threshold(keys: Tensor, count: int) -> Tensor:
    """The `count`-th smallest of `keys` (N,): the keys at or below it are `count` of them (ties
    aside). -inf when count is 0 or there are no keys."""
    count = min(count, keys.numel())
    if count == 0:
        return torch.tensor(-math.inf, device=keys.device)
    return torch.topk(keys.float(), count, largest=False).values[-1]


def forking_token_mask(entropy: Tensor, mask: Tensor, threshold: Tensor | float) -> Tensor:
    """(B, T) the valid tokens whose entropy is at least `threshold` (the top share's)."""
    return mask.bool() & (entropy >= threshold)


def token_covariance(logp: Tensor, advantages: Tensor, mask: Tensor, mean_logp: Tensor, mean_adv: Tensor) -> Tensor:
    """(B, T) (log pi - mean log pi) * (A - mean A) on valid tokens, 0 elsewhere. The means are the
    batch's (over every valid token of the step, `mean_logp`, `mean_adv`)."""
    return zero_masked((logp.detach() - mean_logp) * (advantages - mean_adv), mask)


def ppo_clipped(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, low: float, high: float) -> Tensor:
    """(B, T) valid tokens whose clipped PPO term is the one in force (the clip cuts their gradient):
    -A * clip(ratio) > -A * ratio, as the reference's `clip_by_origin`."""
    ratio = (logp.detach() - old_logp).exp()
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - low, 1 + high)
    return mask.bool() & (clipped > unclipped)


def clip_cov_candidates(cov: Tensor, mask: Tensor, already_clipped: Tensor, lb: float, ub: float) -> Tensor:
    """(B, T) Clip-Cov's candidates: valid tokens with lb < Cov < ub that the PPO clip has not cut."""
    return mask.bool() & ~already_clipped & (cov > lb) & (cov < ub)


def clip_cov_selection(candidates: Tensor, keys: Tensor, key_threshold: Tensor | float) -> Tensor:
    """(B, T) the candidates whose random key is at or below `key_threshold` (the count-th smallest
    key among every candidate of the step): a uniformly random subset of `count` candidates."""
    return candidates & (keys <= key_threshold)


def kl_cov_selection(cov: Tensor, mask: Tensor, threshold: Tensor | float) -> Tensor:
    """(B, T) KL-Cov's tokens: valid tokens whose Cov is at least `threshold` (the top share's)."""
    return mask.bool() & (cov >= threshold)


def row_keys(row_ids: Tensor, columns: int, seed: int) -> Tensor:
    """(B, columns) uniform random keys in [0, 1), each row drawn from a generator seeded by `seed`
    and its row id: a row gets the same keys whatever process holds it and whatever else is in
    its batch (Clip-Cov's random choice is then the same over one process or several)."""
    out = torch.empty(len(row_ids), columns)
    for i, row in enumerate(row_ids.tolist()):
        generator = torch.Generator().manual_seed((seed * 1_000_003 + int(row)) % (2**63))
        out[i] = torch.rand(columns, generator=generator)
    return out.to(row_ids.device)
