"""Token-level statistics that ignore padding: the one place masks are applied.

`mask` is 1.0 (or True) on response tokens that count and 0 on padding, prompt or
filtered-out tokens. Values at masked positions never reach a result or a gradient:
they are replaced with zeros by `torch.where` before any arithmetic (a multiply by
the mask would turn an `inf` there into `nan`).
"""

from __future__ import annotations

import torch
from torch import Tensor


def zero_masked(values: Tensor, mask: Tensor) -> Tensor:
    """`values` with every masked position set to 0 (gradient 0 there too)."""
    return torch.where(mask.bool(), values, torch.zeros_like(values))


def masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of `values` where `mask` is set, over `dim` (all elements when None)."""
    kept = zero_masked(values, mask)
    return kept.sum() if dim is None else kept.sum(dim=dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of `values` where `mask` is set; 0 where nothing is set (not nan)."""
    count = mask.to(values.dtype).sum() if dim is None else mask.to(values.dtype).sum(dim=dim)
    return masked_sum(values, mask, dim) / count.clamp(min=1)


def masked_var(values: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Variance of the valid elements (scalar). Unbiased (Bessel, n/(n-1)) by default,
    as verl's `masked_var`; with fewer than two valid elements the variance is 0."""
    values = zero_masked(values, mask)
    mean = masked_mean(values, mask)
    var = masked_mean((values - mean) ** 2, mask)
    if unbiased:
        n = mask.to(values.dtype).sum()
        var = torch.where(n > 1, var * n / (n - 1).clamp(min=1), torch.zeros_like(var))
    return var


def masked_whiten(values: Tensor, mask: Tensor, eps: float, shift_mean: bool = True) -> Tensor:
    """(values - mean) / sqrt(var + eps) over the valid elements (unbiased var), 0 at masked positions.

    With `shift_mean=False` only the scale is normalised (the mean is kept).
    """
    values = zero_masked(values, mask)
    whitened = values - masked_mean(values, mask) if shift_mean else values
    whitened = whitened * torch.rsqrt(masked_var(values, mask) + eps)
    return zero_masked(whitened, mask)
