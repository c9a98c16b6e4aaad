"""Criteria that fail (raise, time out, are not run) on most rollouts (`FailureWatch`): a failed criterion
scores 0, so a run whose scoring fails everywhere would otherwise end "succeeded" with reward 0, the cause
visible only inside each rollout."""

from __future__ import annotations

from trainers.report import Reporter
from trainers.update.groups import Group

FAILURE_RATE = "reward/criterion_failure_rate/"


class FailureWatch:
    """A criterion whose failure rate on a step is above `warn_share` starts a streak: the first
    step of each streak sends a warning (not every step: one banner, not a flood). After
    `stop_after` steps in a row (0: never) the run stops, failed, naming the criterion and
    its last error."""

    def __init__(self, warn_share: float, stop_after: int) -> None:
        self.warn_share = warn_share
        self.stop_after = stop_after
        self.streaks: dict[str, int] = {}
        self.last_errors: dict[str, str] = {}

    def remember_errors(self, groups: list[Group]) -> None:
        """Keep each criterion's latest error text (this process's own rollouts), for the messages."""
        for result in (r for g in groups for r in g.results):
            for name, score in result.scores.items():
                if score.error is not None:
                    self.last_errors[name] = score.error

    def observe(self, step: int, metrics: dict[str, float], reporter: Reporter) -> str | None:
        """Update the streaks from a step's failure rates; warn at a streak's start. Returns why
        the run must stop, or None."""
        for key, rate in metrics.items():
            if not key.startswith(FAILURE_RATE):
                continue
            name = key.removeprefix(FAILURE_RATE)
            self.streaks[name] = self.streaks.get(name, 0) + 1 if rate > self.warn_share else 0
            if self.streaks[name] == 1:
                reporter.warning(step, self._describe(name, f"on {rate:.0%} of step {step}'s rollouts"))
        for name, streak in self.streaks.items():
            if self.stop_after and streak >= self.stop_after:
                return self._describe(
                    name, f"on more than {self.warn_share:.0%} of the rollouts for {streak} steps in a row"
                )
        return None

    def _describe(self, name: str, where: str) -> str:
        last = self.last_errors.get(name, "")
        return (f"criterion {name!r} failed {where} (it scores 0 where it fails, so the reward says little)"
                + (f"; last error: {last}" if last else ""))  # fmt: skip
