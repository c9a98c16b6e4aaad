"""Bucketing in SQL gives the same curve as the Python reference downsampler."""

import math
import random

import pytest

from studio.runs.downsample import downsample
from studio.runs.series import Window, key_series, metric_keys
from tests.studio.records import add_points


def test_it_buckets_in_sql_exactly_like_the_reference(run):
    rng = random.Random(1)
    values = [rng.gauss(0, 1) for _ in range(3000)]
    add_points(run, "reward/mean", values)
    got = key_series(run.pk, "reward/mean", Window(points=200))
    want = downsample(range(3000), values, points=200)
    assert len(got) == len(want) == 200
    assert got.x == pytest.approx(want.x)
    assert got.y == pytest.approx(want.y)
    assert got.y_min == want.y_min
    assert got.y_max == want.y_max


def test_it_buckets_by_wall_time_when_asked(run):
    values = [float(i % 17) for i in range(1500)]
    add_points(run, "actor/kl", values)
    got = key_series(run.pk, "actor/kl", Window(x="time", points=100))
    want = downsample([1_700_000_000.0 + 2.0 * i for i in range(1500)], values, points=100)
    assert got.x == pytest.approx(want.x)
    assert got.y_max == want.y_max


def test_it_returns_raw_points_when_they_fit(run):
    add_points(run, "actor/lr", [1e-6, 2e-6, 3e-6])
    got = key_series(run.pk, "actor/lr", Window(points=10))
    assert got.x == [0.0, 1.0, 2.0]
    assert got.y == got.y_min == got.y_max == [1e-6, 2e-6, 3e-6]


def test_a_window_returns_only_its_steps_in_full_detail(run):
    add_points(run, "reward/mean", [float(i) for i in range(5000)])
    full = key_series(run.pk, "reward/mean", Window(points=100))
    zoomed = key_series(run.pk, "reward/mean", Window(start=1000, end=1049, points=100))
    assert len(full) == 100 and full.y_min[0] != full.y_max[0]
    assert zoomed.x == [float(s) for s in range(1000, 1050)]


def test_it_leaves_out_values_that_cannot_be_drawn(run):
    add_points(run, "actor/grad_norm", [1.0, math.inf, 2.0, -math.inf, 3.0])
    got = key_series(run.pk, "actor/grad_norm", Window())
    assert got.y == [1.0, 2.0, 3.0]


def test_it_lists_each_key_once_in_order(run):
    add_points(run, "reward/mean", [0.0] * 5)
    add_points(run, "actor/kl", [0.0] * 3)
    add_points(run, "perf/tokens_per_s", [1.0])
    assert metric_keys(run.pk) == ["actor/kl", "perf/tokens_per_s", "reward/mean"]


def test_it_refuses_a_window_that_makes_no_sense():
    with pytest.raises(ValueError, match="x must be one of"):
        Window(x="epoch")
    with pytest.raises(ValueError, match="points must be between"):
        Window(points=0)
    with pytest.raises(ValueError, match="is after end"):
        Window(start=10, end=5)


def test_each_series_names_its_last_step_raw_or_bucketed_by_step_or_wall_time(run):
    # The page drops a live point whose step it already drew; in wall-time mode x cannot tell it.
    add_points(run, "reward/mean", [0.5] * 3000, start_step=10)
    for x in ("step", "time"):
        assert key_series(run.pk, "reward/mean", Window(x=x, points=100)).last_step == 3009
        assert key_series(run.pk, "reward/mean", Window(x=x, points=5000)).last_step == 3009
    assert key_series(run.pk, "reward/mean", Window(end=99, points=100)).last_step == 99
    assert key_series(run.pk, "nope", Window()).last_step is None
