"""Min/max-per-bucket downsampling of one metric series.

A long run has far more points per curve than a chart has pixels. We split the x range
into equal-width buckets and keep, per bucket, the mean x, the mean y and the extremes
(min and max y), so a spike that lasted one step still shows in the band around the line.

This module is the reference implementation in plain Python (no Django). The endpoint does
the same bucketing in SQL (`studio.curves.series`) so 100,000 points never leave the
database; the tests check the two agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

DEFAULT_POINTS = 1000
MAX_POINTS = 5000


@dataclass
class Series:
    """Columns of one curve as the API sends them; `y_min`/`y_max` equal `y` for raw points."""

    x: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    y_min: list[float] = field(default_factory=list)
    y_max: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.x)

    def append(self, x: float, y: float, y_min: float, y_max: float) -> None:
        self.x.append(x)
        self.y.append(y)
        self.y_min.append(y_min)
        self.y_max.append(y_max)

    def as_dict(self) -> dict[str, list[float]]:
        return {"x": self.x, "y": self.y, "y_min": self.y_min, "y_max": self.y_max}


def bucket_width(lo: float, hi: float, points: int) -> float:
    """Width of one bucket so that [lo, hi] splits into at most `points` buckets.

    The width is never 0 (a single-x series gets width 1), so `bucket_index` never divides by 0.
    """
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    span = hi - lo
    return span / points if span > 0 else 1.0


def bucket_index(x: float, lo: float, width: float, points: int) -> int:
    """Bucket of `x`; the right edge `hi` falls in the last bucket instead of opening a new one."""
    return min(int(math.floor((x - lo) / width)), points - 1)


def downsample(xs: Iterable[float], ys: Iterable[float], points: int = DEFAULT_POINTS) -> Series:
    """Reduce a series (sorted by x or not) to at most `points` buckets, keeping extremes.

    Series with no more than `points` points come back unchanged (sorted by x), with
    y_min == y_max == y. Non-finite y values (NaN, inf) are dropped: they cannot be drawn and
    would poison a bucket's mean.
    """
    pairs = sorted((float(x), float(y)) for x, y in zip(xs, ys, strict=True) if math.isfinite(y))
    out = Series()
    if len(pairs) <= points:
        for x, y in pairs:
            out.append(x, y, y, y)
        return out
    lo, hi = pairs[0][0], pairs[-1][0]
    width = bucket_width(lo, hi, points)
    current, sx, sy, n, mn, mx = None, 0.0, 0.0, 0, math.inf, -math.inf
    for x, y in pairs:
        b = bucket_index(x, lo, width, points)
        if b != current and n:
            out.append(sx / n, sy / n, mn, mx)
            sx, sy, n, mn, mx = 0.0, 0.0, 0, math.inf, -math.inf
        current = b
        sx, sy, n = sx + x, sy + y, n + 1
        mn, mx = min(mn, y), max(mx, y)
    if n:
        out.append(sx / n, sy / n, mn, mx)
    return out
