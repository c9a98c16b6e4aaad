"""The run page's ETA (frontend/static/js/eta.js) under node: derived from measured step times,
the first step's model load left out once a second step is measured, nothing shown before.

The browser side (the header showing it on a live run) is in test_run_page_first_hour.py."""

import pytest

from tests.browser.test_js_units import NODE, run_js

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


def etas(tmp_path, script: str) -> list:
    """Runs `script` with a StepClock `clock` (started at t=1000) and prints what it `out.push`es."""
    return run_js(
        tmp_path,
        f"""
        const {{ StepClock }} = await import("./eta.js");
        const clock = new StepClock();
        clock.started = 1000;
        const out = [];
        {script}
        console.log(JSON.stringify(out));
        """,
    )


def test_there_is_no_eta_before_a_step_is_measured(tmp_path):
    assert etas(
        tmp_path, "out.push(clock.eta(0, 200)); clock.started = null; clock.seen(5, 2000); out.push(clock.eta(5, 200));"
    ) == [None, None]


def test_the_first_step_counts_with_its_model_load_only_until_a_second_step_is_measured(tmp_path):
    got = etas(
        tmp_path,
        """
        clock.seen(1, 1030);           // 30 s after the start: load + one step
        out.push(clock.eta(1, 200));
        clock.seen(2, 1030.5);         // the second step took 0.5 s
        out.push(clock.eta(2, 200));
        """,
    )
    assert got[0] == pytest.approx(199 * 30)
    assert got[1] == pytest.approx(198 * 0.5)


def test_the_trainers_step_time_stands_in_until_two_steps_are_seen_live(tmp_path):
    got = etas(
        tmp_path,
        """
        clock.seen(1, 1030, 0.9);     // the trainer's timing/step_s: step 1 warms up, no model load
        out.push(clock.eta(1, 101));
        clock.seen(2, 1030.2, 0.15);  // then the wall time between the two events decides
        out.push(clock.eta(2, 101));
        const opened = new StepClock();   // a page opened midway: the loaded curve's last points
        opened.seed([[1, 5.0], [40, 0.3], [41, 0.2], [42, 0.25]]);
        out.push(opened.eta(42, 142));
        """,
    )
    assert got[0] == pytest.approx(100 * 0.9)
    assert got[1] == pytest.approx(99 * 0.2)
    assert got[2] == pytest.approx(100 * 0.25)  # the median, step 1's warm-up left out


def test_one_slow_step_does_not_swing_the_eta(tmp_path):
    got = etas(
        tmp_path,
        """
        const times = [1000, 1001, 1002, 1003, 1033, 1034];  // step 4 -> 5 saved a checkpoint: 30 s
        times.forEach((t, i) => clock.seen(10 + i, t));
        out.push(clock.eta(15, 115));
        """,
    )
    assert got == [pytest.approx(100 * 1.0)]
