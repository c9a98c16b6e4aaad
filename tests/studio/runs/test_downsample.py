"""The reference min/max-per-bucket downsampler (pure Python)."""

import math
import random

import pytest

from studio.runs.downsample import bucket_index, bucket_span, downsample


def test_it_returns_short_series_unchanged_and_sorted():
    out = downsample([3, 1, 2], [30.0, 10.0, 20.0], points=10)
    assert out.x == [1.0, 2.0, 3.0]
    assert out.y == [10.0, 20.0, 30.0]
    assert out.y_min == out.y and out.y_max == out.y


def test_it_never_returns_more_buckets_than_asked():
    xs = list(range(100_000))
    out = downsample(xs, [math.sin(x / 50) for x in xs], points=1000)
    assert 990 <= len(out) <= 1000


def test_it_keeps_a_one_step_spike_in_the_bucket_max():
    xs = list(range(10_000))
    ys = [0.0] * 10_000
    ys[4321] = 99.0
    ys[777] = -5.0
    out = downsample(xs, ys, points=100)
    assert max(out.y_max) == 99.0
    assert min(out.y_min) == -5.0
    # the spike is diluted in the mean, which is why the extremes are kept
    assert max(out.y) == pytest.approx(99.0 / 100)


def test_each_bucket_holds_the_mean_and_extremes_of_its_points():
    xs = list(range(10))
    ys = [1.0, 3.0, 2.0, 8.0, 4.0, 6.0, 5.0, 7.0, 9.0, 0.0]
    out = downsample(xs, ys, points=5)  # 10 steps in 5 buckets -> {0,1},{2,3},{4,5},{6,7},{8,9}
    assert out.x == [0.5, 2.5, 4.5, 6.5, 8.5]
    assert out.y == [2.0, 5.0, 5.0, 6.0, 4.5]
    assert out.y_min == [1.0, 2.0, 4.0, 5.0, 0.0]
    assert out.y_max == [3.0, 8.0, 6.0, 7.0, 9.0]


def test_it_drops_values_that_cannot_be_drawn():
    out = downsample([0, 1, 2, 3], [1.0, math.nan, math.inf, 2.0], points=10)
    assert out.x == [0.0, 3.0]


def test_it_puts_the_last_x_in_the_last_bucket():
    assert bucket_index(100.0, 0.0, bucket_span(0.0, 100.0, integer=False), 10) == 9
    assert bucket_index(100, 0, bucket_span(0, 100, integer=True), 10) == 9
    assert bucket_index(0, 0, bucket_span(0, 100, integer=True), 10) == 0


def test_integer_steps_split_into_equal_runs_of_steps():
    span = bucket_span(0, 99, integer=True)
    assert [bucket_index(s, 0, span, 10) for s in (0, 9, 10, 99)] == [0, 0, 1, 9]


def test_a_single_x_gets_a_nonzero_span():
    assert bucket_span(5.0, 5.0, integer=False) == 1.0
    assert bucket_span(5, 5, integer=True) == 1


def test_it_refuses_zero_points():
    with pytest.raises(ValueError, match="points must be >= 1"):
        downsample([1, 2], [1.0, 2.0], points=0)


def test_every_input_point_lands_in_exactly_one_bucket():
    rng = random.Random(0)
    xs = sorted(rng.uniform(0, 1e6) for _ in range(5000))
    ys = [rng.gauss(0, 1) for _ in xs]
    out = downsample(xs, ys, points=300)
    assert min(out.y_min) == min(ys)
    assert max(out.y_max) == max(ys)
    assert out.x == sorted(out.x)
    assert all(lo <= y <= hi for y, lo, hi in zip(out.y, out.y_min, out.y_max, strict=True))
