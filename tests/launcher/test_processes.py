"""launcher.processes' supervision: the back-off schedule, and a child that exits started again with
the same command line and the same log file (appended)."""

from __future__ import annotations

import sys
import time

from launcher.processes import RESTART_MAX_S, RESTART_RESET_AFTER_S, Children, restart_delay


def test_the_back_off_doubles_from_one_second_up_to_thirty_and_resets_once_a_child_stayed_up():
    delays, delay = [], None
    for _ in range(8):
        delay = restart_delay(delay, up_for=0.5)
        delays.append(delay)
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]
    assert restart_delay(RESTART_MAX_S, up_for=RESTART_RESET_AFTER_S - 1) == 30
    assert restart_delay(RESTART_MAX_S, up_for=RESTART_RESET_AFTER_S) == 1  # it stayed up a minute
    assert restart_delay(None, up_for=RESTART_RESET_AFTER_S * 10) == 1


def test_a_child_that_exits_is_started_again_after_its_back_off_into_the_same_log(tmp_path):
    log = tmp_path / "child.log"
    argv = [sys.executable, "-c", "print('started', flush=True); raise SystemExit(3)"]
    children = Children()
    first = children.start("child", argv, log=log)
    first.wait(30)
    exits, started = children.restart_exited()
    assert [(e.name, e.code, e.delay, e.restarts, e.log) for e in exits] == [("child", 3, 1.0, 1, log)]
    assert started == []  # not before its back-off
    deadline = time.monotonic() + 10
    while not started and time.monotonic() < deadline:
        time.sleep(0.1)
        exits, started = children.restart_exited()
        assert not exits  # reported once
    assert started == ["child"]
    [(name, again)] = children.procs
    assert name == "child" and again is not first
    again.wait(30)
    exits, _ = children.restart_exited()
    assert [(e.code, e.delay, e.restarts) for e in exits] == [(3, 2.0, 2)]  # doubled: it did not stay up
    assert log.read_text().splitlines() == ["started", "started"]
    children.stop_all()
