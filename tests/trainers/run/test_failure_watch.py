"""`FailureWatch` on its own (the whole-run tests in test_loop.py show it wired into a run): a streak
above the share warns once at its start, stops after N steps when asked, and below the share says
nothing."""

from trainers.report import MemoryReporter
from trainers.run.failure_watch import FAILURE_RATE, FailureWatch


def rates(**by_criterion: float) -> dict[str, float]:
    return {f"{FAILURE_RATE}{name}": rate for name, rate in by_criterion.items()} | {"reward/mean": 0.0}


def test_a_streak_warns_once_at_its_start_and_again_after_it_ends():
    watch, reporter = FailureWatch(warn_share=0.5, stop_after=0), MemoryReporter()
    for step, rate in enumerate([1.0, 0.9, 0.1, 0.8], start=1):
        assert watch.observe(step, rates(broken=rate, letter=0.0), reporter) is None
    assert [step for step, _ in reporter.warnings] == [1, 4]
    assert reporter.warnings[0][1].startswith("criterion 'broken' failed on 100% of step 1's rollouts")


def test_it_stops_after_n_steps_in_a_row():
    watch, reporter = FailureWatch(warn_share=0.5, stop_after=2), MemoryReporter()
    assert watch.observe(1, rates(broken=1.0), reporter) is None
    why = watch.observe(2, rates(broken=1.0), reporter)
    assert why is not None and why.startswith("criterion 'broken' failed on more than 50% of the rollouts for 2 steps")


def test_a_criterion_failing_below_the_share_does_not_warn():
    watch, reporter = FailureWatch(warn_share=1.0, stop_after=0), MemoryReporter()
    for step in (1, 2, 3):
        assert watch.observe(step, rates(broken=1.0), reporter) is None
    assert reporter.warnings == []
