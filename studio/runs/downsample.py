"""Min/max-per-bucket downsampling of one metric series.

A long run has far more points per curve than a chart has pixels. We split the x range
into equal-width buckets and keep, per bucket, the mean x, the mean y and the extremes
(min and max y), so a spike that lasted one step still shows in the band around the line.

This module is the reference implementation in plain Python (no Django). The endpoint does
the same bucketing in SQL (`studio.runs.series`) so 100,000 points never leave the
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
    """Columns of one curve as the API sends them; `y_min`/`y_max` equal `y` for raw points.

    `last_step` is the highest step among the points sent (None when unknown): in wall-time
    mode x says nothing about steps, and the page needs it to drop live points already drawn.
    """

    x: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    y_min: list[float] = field(default_factory=list)
    y_max: list[float] = field(default_factory=list)
    last_step: int | None = None

    def __len__(self) -> int:
        return len(self.x)

    def append(self, x: float, y: float, y_min: float, y_max: float) -> None:
        self.x.append(x)
        self.y.append(y)
        self.y_min.append(y_min)
        self.y_max.append(y_max)

    def saw_step(self, step: int | None) -> None:
        if step is not None and (self.last_step is None or step > self.last_step):
            self.last_step = int(step)

    def as_dict(self) -> dict[str, list[float] | int | None]:
        return {"x": self.x, "y": self.y, "y_min": self.y_min, "y_max": self.y_max, "last_step": self.last_step}


def bucket_span(lo: float, hi: float, integer: bool) -> float:
    """Length of the x range the buckets split.

    Integer x (steps) covers the hi - lo + 1 positions, so `bucket_index` stays below `points`
    without a clamp and the database computes it in integer arithmetic. A float range of zero
    length gets span 1 so nothing divides by 0.
    """
    if integer:
        return int(hi - lo + 1)
    return hi - lo if hi > lo else 1.0


def bucket_index(x: float, lo: float, span: float, points: int) -> int:
    """Bucket of `x` among `points` equal buckets of `span`; a float range's right edge falls in
    the last bucket instead of opening a new one. Same arithmetic, in the same order, as the SQL."""
    if isinstance(span, int):
        return (x - lo) * points // span
    return min(math.floor((x - lo) * points / span), points - 1)


def downsample(xs: Iterable[float], ys: Iterable[float], points: int = DEFAULT_POINTS) -> Series:
    """Reduce a series (sorted by x or not) to at most `points` buckets, keeping extremes.

    Series with no more than `points` points come back unchanged (sorted by x), with
    y_min == y_max == y. Non-finite y values (NaN, inf) are dropped: they cannot be drawn and
    would poison a bucket's mean. All-integer x (steps) is bucketed with integer arithmetic.
    """
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    pairs = sorted((x, float(y)) for x, y in zip(xs, ys, strict=True) if math.isfinite(y))
    out = Series()
    if len(pairs) <= points:
        for x, y in pairs:
            out.append(float(x), y, y, y)
        return out
    integer = all(isinstance(x, int) for x, _ in pairs)
    lo, hi = pairs[0][0], pairs[-1][0]
    span = bucket_span(lo, hi, integer)
    current, sx, sy, n, mn, mx = None, 0.0, 0.0, 0, math.inf, -math.inf
    for x, y in pairs:
        b = bucket_index(x, lo, span, points)
        if b != current and n:
            out.append(sx / n, sy / n, mn, mx)
            sx, sy, n, mn, mx = 0.0, 0.0, 0, math.inf, -math.inf
        current = b
        sx, sy, n = sx + x, sy + y, n + 1
        mn, mx = min(mn, y), max(mx, y)
    if n:
        out.append(sx / n, sy / n, mn, mx)
    return out
