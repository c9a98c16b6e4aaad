"""A rollout's teacher disagreement (on-policy distillation): written with the rollout into its logprobs column
(studio.runs.token_data: no migration), answered apart by the rollout API (`logprobs`, `teacher_tokens`),
checked for type and size; rollouts without a teacher stay as they were."""

from __future__ import annotations

from studio.runs import reports, token_data
from studio.runs.models import Rollout as RolloutRow
from tests.studio.base import StudioTestCase
from trainers.report import CriterionScore, Rollout


def rollout(**extra) -> Rollout:
    return Rollout(step=1, prompt_id="p0", sample_index=0, prompt="Repeat the letter: a", completion="aab",
                   reward=0.5, scores={"letter": CriterionScore(0.5)}, num_tokens=3, **extra)  # fmt: skip


class TeacherTokensTest(StudioTestCase):
    def detail(self, run, row) -> dict:
        response = self.client_for(self.bob).get(f"/api/runs/{run.pk}/rollouts/{row.pk}/")
        self.assertEqual(response.status_code, 200, response.content)
        return response.json()

    def test_the_teacher_tokens_come_back_beside_the_logprobs(self):
        run = self.make_run("running")
        tokens = [["a", 0.0], ["a", 1.25], ["b", None]]
        reports.write(run.pk, "rollouts", 1, [rollout(logprobs=[-0.1, -0.2, -0.3], teacher_tokens=tokens)])
        body = self.detail(run, RolloutRow.objects.get(run=run))
        self.assertEqual(body["teacher_tokens"], tokens)
        self.assertEqual(body["logprobs"], [-0.1, -0.2, -0.3])

    def test_a_rollout_without_a_teacher_keeps_its_logprobs_list(self):
        run = self.make_run("running")
        reports.write(run.pk, "rollouts", 1, [rollout(logprobs=[-0.5])])
        row = RolloutRow.objects.get(run=run)
        self.assertEqual(row.logprobs, [-0.5])
        body = self.detail(run, row)
        self.assertEqual((body["logprobs"], body["teacher_tokens"]), ([-0.5], None))

    def test_teacher_tokens_are_checked_for_type_and_size(self):
        stored = token_data.stored(None, [["x" * 500, float("nan")], "junk", ["b", True], ["c", 2]])
        self.assertEqual(stored["teacher_tokens"], [["x" * token_data.MAX_PIECE_CHARS, None], ["", None],
                                                    ["b", None], ["c", 2.0]])  # fmt: skip
        long = token_data.stored(None, [["t", 0.0]] * (token_data.MAX_TOKENS + 5))
        self.assertEqual(len(long["teacher_tokens"]), token_data.MAX_TOKENS)

    def test_another_teams_member_cannot_read_them(self):
        run = self.make_run("running")
        reports.write(run.pk, "rollouts", 1, [rollout(teacher_tokens=[["a", 0.5]])])
        row = RolloutRow.objects.get(run=run)
        response = self.client_for(self.charlie).get(f"/api/runs/{run.pk}/rollouts/{row.pk}/")
        self.assertEqual(response.status_code, 404)
