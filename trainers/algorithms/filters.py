"""Sampling and loss filters from DAPO (arXiv:2503.14476): which samples and tokens train.

These are not a registry: each has its own signature and is switched on by its own
`AlgorithmSpec` flag (`dynamic_sampling`, `overlong_filter`, `overlong_penalty`),
and the loop applies them at different points of the step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainers.algorithms.groups import group_has_spread


def groups_with_reward_spread(scores: Tensor, group_index: Tensor) -> Tensor:
    """(B,) bool: keep the samples of groups whose scores are not all equal.

    DAPO dynamic sampling (section 3.2, eq. 11): a group where every completion got the
    same reward has zero advantage under every group estimator and only dilutes the
    batch; the loop drops it and samples more prompts. A group of one is dropped too.

    scores (B,) float sequence scores; group_index (B,) long prompt ids.
    """
    return group_has_spread(scores, group_index)


def overlong_loss_mask(truncated: Tensor, mask: Tensor) -> Tensor:
    """(B, T) loss mask with every token of a truncated completion removed.

    DAPO overlong filtering (section 3.4): a completion cut at max_new_tokens has no
    verdict on its full answer, so its reward is noise; it does not train.

    truncated (B,) bool (finish reason "length"); mask (B, T) the response mask.
    """
    return mask * (~truncated.bool()).unsqueeze(-1).to(mask.dtype)


def overlong_soft_penalty(lengths: Tensor, max_new_tokens: int, buffer: int, factor: float) -> Tensor:
    """(B,) reward to add: 0 up to max_new_tokens - buffer, then falling linearly to -factor
    at max_new_tokens (and staying there).

    DAPO soft overlong punishment (section 3.4, eq. 13) with L_max = max_new_tokens and
    L_cache = buffer: R = ((L_max - L_cache) - |y|) / L_cache * factor when |y| is in the buffer.

    lengths (B,) completion token counts.
    """
    if not 0 < buffer <= max_new_tokens:
        raise ValueError(f"overlong buffer must be in 1..max_new_tokens ({max_new_tokens}), got {buffer}")
    excess = lengths.to(torch.float32) - (max_new_tokens - buffer)  # (B,) tokens into the buffer
    return (-excess / buffer * factor).clamp(min=-factor, max=0.0)
