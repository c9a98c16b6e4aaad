"""The worker's reporter stores which policy versions sampled each rollout and how stale it was
(asynchronous runs, issue 28: trainers.report.Rollout.policy_versions / staleness), and leaves both
empty for a rollout that recorded none."""

from __future__ import annotations

from studio.runs.models import Rollout as RolloutRow
from studio.runs.models import RunEvent
from tests.studio.base import StudioTestCase
from trainers.report import CriterionScore, Rollout
from workers.reporting import DatabaseReporter, version_spans


def rollout(i: int, versions: list[list[int]] | None, staleness: int | None) -> Rollout:
    return Rollout(step=5, prompt_id="p1", sample_index=i, prompt="Say a", completion="a", reward=1.0,
                   scores={"letter": CriterionScore(1.0)}, num_tokens=52, policy_versions=versions,
                   staleness=staleness)  # fmt: skip


class ReportedVersionsTest(StudioTestCase):
    def test_the_versions_and_staleness_of_each_rollout_are_stored(self):
        run = self.make_run("running")
        DatabaseReporter(run.pk).rollouts(5, [rollout(0, [[3, 40], [4, 12]], 1), rollout(1, [[4, 52]], 0),
                                              rollout(2, None, None)])  # fmt: skip
        rows = RolloutRow.objects.filter(run=run).order_by("sample_index")
        self.assertEqual([(r.policy_versions, r.staleness) for r in rows],
                         [([[3, 40], [4, 12]], 1), ([[4, 52]], 0), (None, None)])  # fmt: skip
        # The live event's summaries carry the staleness (the group strip shows it), not the spans.
        items = RunEvent.objects.get(run=run, kind="rollouts").payload["items"]
        self.assertEqual([i["staleness"] for i in items], [1, 0, None])
        self.assertNotIn("policy_versions", items[0])


def test_spans_are_stored_as_plain_ints():
    class Version(int):  # stands for a numpy or tensor scalar: an int, not a plain one
        pass

    assert version_spans([[Version(3), Version(7)]]) == [[3, 7]]
    assert type(version_spans([[Version(3), Version(7)]])[0][0]) is int
    assert version_spans(None) is None
