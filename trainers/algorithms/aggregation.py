"""Loss aggregation modes: a (B, T) matrix of per-token losses -> one scalar.

Every entry of `LOSS_AGGREGATIONS` has the one signature::

    fn(loss_mat, mask, *, norm) -> scalar
        loss_mat (B, T) float, mask (B, T), norm: int | None (only seq-mean-token-sum-norm uses it)

The modes differ in how much each token weighs (DAPO, arXiv:2503.14476, section 3.3;
Dr. GRPO, arXiv:2503.20783, section 3.1). The "seq-mean-*" modes average over the
sequences that have at least one valid token: a sequence masked out entirely (e.g.
by the overlong filter) neither counts in the mean nor produces 0/0. A batch with
no valid token gives a loss of 0 that still backpropagates (zeros).

With gradient accumulation over micro-batches, weight each micro-batch's loss by
`accumulation_weight` (its share of the units the mode averages over; 1 for a sum) to get
exactly the loss of the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from trainers.algorithms.masked import masked_mean, masked_sum
from trainers.registry import Registry

AggregationFn = Callable[..., Tensor]

LOSS_AGGREGATIONS: Registry[AggregationFn] = Registry("loss aggregation mode")


def _has_tokens(mask: Tensor) -> Tensor:
    """(B,) bool: sequences with at least one valid token."""
    return mask.bool().any(dim=-1)


@LOSS_AGGREGATIONS.register("token-mean")
def token_mean(loss_mat: Tensor, mask: Tensor, *, norm: int | None = None) -> Tensor:
    """sum_{i,t} l_it / (number of valid tokens): every token weighs the same (DAPO)."""
    return masked_mean(loss_mat, mask)


@LOSS_AGGREGATIONS.register("token-sum")
def token_sum(loss_mat: Tensor, mask: Tensor, *, norm: int | None = None) -> Tensor:
    """sum_{i,t} l_it: every token weighs the same and the loss grows with the batch's tokens
    (verl's "token-sum"; scale the learning rate with the batch)."""
    return masked_sum(loss_mat, mask)


@LOSS_AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean(loss_mat: Tensor, mask: Tensor, *, norm: int | None = None) -> Tensor:
    """mean_i (sum_t l_it / |y_i|): every sequence weighs the same (original GRPO)."""
    per_sequence = masked_mean(loss_mat, mask, dim=-1)  # (B,)
    return masked_mean(per_sequence, _has_tokens(mask))


@LOSS_AGGREGATIONS.register("seq-mean-token-sum")
def seq_mean_token_sum(loss_mat: Tensor, mask: Tensor, *, norm: int | None = None) -> Tensor:
    """mean_i sum_t l_it: longer sequences weigh more."""
    per_sequence = masked_sum(loss_mat, mask, dim=-1)  # (B,)
    return masked_mean(per_sequence, _has_tokens(mask))


@LOSS_AGGREGATIONS.register("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(loss_mat: Tensor, mask: Tensor, *, norm: int | None = None) -> Tensor:
    """mean_i (sum_t l_it / norm) with a constant `norm` (the max response length):
    no length bias (Dr. GRPO, arXiv:2503.20783, eq. 3)."""
    if norm is None or norm <= 0:
        raise ValueError(f"loss aggregation 'seq-mean-token-sum-norm' needs a positive norm, got {norm!r}")
    per_sequence = masked_sum(loss_mat, mask, dim=-1) / norm  # (B,)
    return masked_mean(per_sequence, _has_tokens(mask))


def aggregate_loss(loss_mat: Tensor, mask: Tensor, mode: str, norm: int | None = None) -> Tensor:
    """Reduce a (B, T) loss matrix to a scalar with the named mode (see `LOSS_AGGREGATIONS`)."""
    return LOSS_AGGREGATIONS.get(mode)(loss_mat, mask, norm=norm)


def aggregation_units(mask: Tensor, mode: str) -> Tensor:
    """What `mode` averages over in this (micro-)batch: valid tokens for the token modes,
    sequences with a valid token for the seq-mean modes (scalar float tensor)."""
    LOSS_AGGREGATIONS.get(mode)  # refuse an unknown mode here too
    if mode.startswith("token-"):
        return mask.float().sum()
    return _has_tokens(mask).float().sum()


def accumulation_weight(mask: Tensor, total_units: Tensor, mode: str) -> Tensor:
    """The factor of a micro-batch's aggregated loss (its `mask`) that makes the accumulated
    gradient the whole batch's: its share of the `total_units` the batch averages over, and 1
    for a sum, whose parts add up as they are."""
    if mode == "token-sum":
        return torch.ones((), device=mask.device)
    return aggregation_units(mask, mode) / total_units
