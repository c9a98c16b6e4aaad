"""A run's "evaluate" action pointed at a held-out dataset: its latest checkpoint scored on that file's rows
(the run's own prompts without one), refused for another team's dataset."""

from __future__ import annotations

from unittest import mock

from studio.celery import app as celery_app
from studio.runs.models import Checkpoint, Run
from tests.studio.base import StudioTestCase, model_folder


class HeldOutEvaluateTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.trained = self.make_run(state="succeeded", name="grpo")
        folder = model_folder(self.data_dir / "runs" / str(self.trained.pk) / "step-4")
        Checkpoint.objects.create(run=self.trained, step=4, path=str(folder))
        self.held_out = self.make_dataset([{"prompt": "Capital of Peru?", "answer": "Lima"}], "held-out.jsonl")

    def evaluate(self, body=None, user=None):
        sent = mock.Mock(return_value=mock.Mock(id="task-1"))
        with mock.patch.object(celery_app, "send_task", sent), self.captureOnCommitCallbacks(execute=True):
            return self.client_for(user or self.bob).post(f"/api/runs/{self.trained.pk}/evaluate/", body, format="json")

    def test_it_evaluates_the_checkpoint_on_the_held_out_rows(self):
        answer = self.evaluate({"dataset": self.held_out.pk})
        self.assertEqual(answer.status_code, 201, answer.data)
        run = Run.objects.get(pk=answer.data["id"])
        self.assertEqual((run.kind, run.spec["data"]["path"]), ("eval", self.held_out.path))
        self.assertTrue(run.spec["eval"]["checkpoint"].endswith("step-4"))
        self.assertIn("on held-out.jsonl", run.name)
        self.assertEqual([c["name"] for c in run.spec["rubric"]["criteria"]], ["correct"])  # the run's rubric

    def test_without_a_dataset_it_evaluates_on_the_runs_own_prompts(self):
        answer = self.evaluate()
        self.assertEqual(answer.status_code, 201, answer.data)
        self.assertEqual(Run.objects.get(pk=answer.data["id"]).spec["data"]["path"], self.dataset.path)

    def test_another_teams_dataset_is_refused_naming_the_field(self):
        theirs = self.make_dataset(name="theirs.jsonl", team=self.other_team)
        answer = self.evaluate({"dataset": theirs.pk})
        self.assertEqual(answer.status_code, 400)
        self.assertIn("dataset", answer.data)
        self.assertEqual(self.evaluate({"dataset": self.held_out.pk}, user=self.carol).status_code, 403)
        self.assertFalse(Run.objects.filter(kind="eval").exists())
