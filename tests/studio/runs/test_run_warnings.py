"""The warnings a run shows (studio.runs.reports.banner, written by reports.write): every distinct warning of
the latest step that had any, one a line; a later step's replace them; the cap drops the oldest line."""

from __future__ import annotations

from studio.runs import reports
from studio.runs.models import WARNING_CHARS, Run
from tests.studio.base import StudioTestCase


class RunWarningsTest(StudioTestCase):
    def warn(self, run: Run, step: int | None, message: str) -> Run:
        reports.write(run.pk, "warning", step, {"message": message})
        run.refresh_from_db()
        return run

    def test_two_at_one_step_both_show_and_a_later_step_replaces_them(self):
        run = self.make_run("running")
        self.warn(run, 2, "groups alike")
        run = self.warn(run, 2, "calls cut\nby the turn limit")  # a message's own line breaks become spaces
        self.assertEqual((run.warnings, run.warning_step), (["groups alike", "calls cut by the turn limit"], 2))
        run = self.warn(run, 2, "groups alike")  # the same check again: shown once
        self.assertEqual(run.warnings, ["groups alike", "calls cut by the turn limit"])
        run = self.warn(run, 3, "no tool called")
        self.assertEqual((run.warnings, run.warning_step), (["no tool called"], 3))

    def test_before_the_first_step_they_gather_too(self):
        run = self.make_run("running")
        self.warn(run, None, "prompts cut")
        run = self.warn(run, None, "system prompt empty")
        self.assertEqual((run.warnings, run.warning_step), (["prompts cut", "system prompt empty"], None))
        run = self.warn(run, 1, "groups alike")
        self.assertEqual(run.warnings, ["groups alike"])

    def test_the_cap_keeps_the_newest(self):
        long = "x" * (WARNING_CHARS // 2)
        text = reports.banner(reports.banner(long + "a", 1, 1, long + "b"), 1, 1, "newest")
        self.assertEqual(text.splitlines(), [long + "b", "newest"])
        self.assertEqual(len(reports.banner("", None, 1, "y" * (WARNING_CHARS + 10))), WARNING_CHARS)
