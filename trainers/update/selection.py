"""The step's token selections (forking tokens, Clip-Cov, KL-Cov) made over every process at once.

The papers define their selections over a batch: the top 20 % of its tokens by entropy, the
covariance against the batch's mean log-prob and advantage, the top k of it. Made per process
(or per micro-batch, as the reference verl patches do), the loss would depend on how the batch is
split. Here each statistic is reduced over the processes first (sums for the means, the values
themselves gathered for the thresholds), so every process computes the same thresholds and a
token is picked or not whatever process holds it: the loss equals the one-process loss on the
same batch (tests/trainers/test_selection_distributed.py). Ties at a threshold are all kept
(the reference's `torch.topk` keeps an arbitrary k of them).

Clip-Cov's random choice uses keys drawn per row from a generator seeded by the run's seed, the
step, the pass and the row's index in the step (rows numbered in process order), so it too is the
same however the rows are split.

Every process must call `select` for every optimisation pass, one without data with `None`: its
collectives are those of the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from trainers.algorithms.masked import masked_sum
from trainers.algorithms.token_selection import (
    TokenSelection,
    bottom_count_threshold,
    clip_cov_candidates,
    clip_cov_selection,
    forking_token_mask,
    kl_cov_selection,
    ppo_clipped,
    row_keys,
    token_covariance,
    top_count,
    top_share_threshold,
)
from trainers.scale.distributed import DistInfo, gathered_lists, max_over_processes, sum_over_processes
from trainers.spec.algorithm import AlgorithmSpec


@dataclass
class PassTokens:
    """One process's tokens at the start of an optimisation pass (each (B, T))."""

    logp: Tensor  # the policy's log-probs now (no gradient)
    entropy: Tensor | None  # its entropy now, when forking tokens are selected
    old_logp: Tensor  # the sampling policy's (the clip's reference)
    advantages: Tensor
    loss_mask: Tensor
    row_ids: Tensor | None = None  # each row's index in the step; None: numbered in process order


@dataclass
class Selected:
    """What a pass trains with: the policy-gradient mask (forking tokens) and the policy loss's selection."""

    pg_mask: Tensor
    selection: TokenSelection | None
    metrics: dict[str, float]


class StepSelector:
    """The run's selections (`algorithm.entropy_top_ratio`, policy loss `clip_cov` / `kl_cov`)."""

    def __init__(self, algo: AlgorithmSpec, dist: DistInfo, device: torch.device, seed: int) -> None:
        self.algo = algo
        self.dist = dist
        self.device = device
        self.seed = seed
        self.forking = algo.entropy_top_ratio is not None
        self.covariance = algo.policy_loss if algo.policy_loss in ("clip_cov", "kl_cov") else None

    @property
    def needs_entropy(self) -> bool:
        return self.forking

    def select(self, tokens: PassTokens | None, step: int, pass_index: int) -> Selected | None:
        """This process's selection for one pass (None without data). Collective."""
        metrics: dict[str, float] = {}
        pg_mask = tokens.loss_mask.bool() if tokens is not None else None
        if self.forking:
            pg_mask = self._forking(tokens, pg_mask, metrics)
        selection = None
        if self.covariance is not None:
            selection = self._covariance(tokens, pg_mask, step, pass_index, metrics)
        if tokens is None:
            return None
        assert pg_mask is not None
        return Selected(pg_mask.to(tokens.loss_mask.dtype), selection, metrics)

    def _forking(self, tokens: PassTokens | None, mask: Tensor | None, metrics: dict[str, float]) -> Tensor | None:
        """The top entropy_top_ratio of every process's valid tokens by entropy (the authors' ceil)."""
        local = tokens.entropy[mask].tolist() if tokens is not None and tokens.entropy is not None else []
        values = torch.tensor(gathered_lists(local, self.dist), dtype=torch.float32)
        threshold = top_share_threshold(values, self.algo.entropy_top_ratio, ceil=True)
        if tokens is None:
            return None
        assert tokens.entropy is not None and mask is not None
        kept = forking_token_mask(tokens.entropy, mask, threshold.to(tokens.entropy.device))
        metrics["actor/forking_entropy_threshold"] = float(threshold) if len(values) else 0.0
        metrics["actor/forking_frac"] = kept.sum().item() / max(1, int(mask.sum()))
        return kept

    def _covariance(
        self, tokens: PassTokens | None, mask: Tensor | None, step: int, pass_index: int, metrics: dict[str, float]
    ) -> TokenSelection | None:
        algo = self.algo
        # Means over every process's valid tokens: one reduction of (sum log pi, sum A, count).
        if tokens is not None:
            assert mask is not None
            local = torch.stack(
                [masked_sum(tokens.logp, mask), masked_sum(tokens.advantages, mask), mask.sum().to(tokens.logp.dtype)]
            ).double()
        else:
            local = torch.zeros(3, dtype=torch.float64, device=self.device)
        sum_logp, sum_adv, count = sum_over_processes(local.to(self.device), self.dist).tolist()
        n = int(count)
        cov = None
        if tokens is not None:
            mean_logp = torch.tensor(sum_logp / max(n, 1), dtype=tokens.logp.dtype, device=tokens.logp.device)
            mean_adv = torch.tensor(sum_adv / max(n, 1), dtype=tokens.logp.dtype, device=tokens.logp.device)
            cov = token_covariance(tokens.logp, tokens.advantages, mask, mean_logp, mean_adv)
        if self.covariance == "kl_cov":
            values = torch.tensor(gathered_lists(cov[mask].tolist() if cov is not None else [], self.dist))
            threshold = top_share_threshold(values, algo.kl_cov_ratio, ceil=False)
            selected = kl_cov_selection(cov, mask, threshold.to(cov.device)) if cov is not None else None
            coef = algo.kl_cov_coef
        else:
            selected = self._clip_cov(tokens, mask, cov, n, step, pass_index)
            coef = 0.0
        if tokens is None or selected is None:
            return None
        metrics["actor/cov_selected_frac"] = selected.sum().item() / max(1, int(mask.sum()))
        return TokenSelection(selected, coef)

    def _clip_cov(
        self, tokens: PassTokens | None, mask: Tensor | None, cov: Tensor | None, n: int, step: int, pass_index: int
    ) -> Tensor | None:
        """A random max(1, floor(r * N)) of every process's candidates (lb < Cov < ub, not clipped)."""
        algo = self.algo
        rows = len(tokens.logp) if tokens is not None else 0
        sizes = gathered_lists([rows], self.dist)  # rows numbered in process order, unless given ids
        offset = sum(sizes[: self.dist.rank])
        width = max_over_processes(tokens.logp.shape[1] if tokens is not None else 0, self.dist, self.device)
        seed = (self.seed * 1_000_003 + step * 1_009 + pass_index) % (2**62)
        candidates = keys = None
        if tokens is not None:
            assert mask is not None and cov is not None
            clipped = ppo_clipped(
                tokens.logp, tokens.old_logp, tokens.advantages, mask, algo.clip_ratio_low, algo.clip_ratio_high
            )
            candidates = clip_cov_candidates(cov, mask, clipped, algo.clip_cov_lb, algo.clip_cov_ub)
            row_ids = tokens.row_ids if tokens.row_ids is not None else torch.arange(offset, offset + rows)
            keys = row_keys(row_ids.cpu(), width, seed)[:, : tokens.logp.shape[1]].to(cov.device)
        local_keys = keys[candidates].tolist() if keys is not None else []
        all_keys = torch.tensor(gathered_lists(local_keys, self.dist), dtype=torch.float32)
        count = top_count(n, algo.clip_cov_ratio, ceil=False)
        threshold = bottom_count_threshold(all_keys, count)
        if candidates is None or keys is None:
            return None
        return clip_cov_selection(candidates, keys, threshold.to(keys.device))
