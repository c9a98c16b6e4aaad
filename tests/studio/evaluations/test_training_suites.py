"""An experiment's suite while it trains: which checkpoints start a suite run, and what a refused one leaves."""

from __future__ import annotations

from unittest import mock

from studio.celery import app as celery_app
from studio.evaluations.models import Suite, SuiteRun, TrainingSuite
from studio.runs.models import Checkpoint, RunEvent
from tests.studio.base import StudioTestCase, model_folder


class TrainingSuiteTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.experiment.model_path = str(model_folder(self.tmp / "models" / "tiny"))
        self.experiment.save()
        self.run = self.make_run(state="running", kind="train", created_by=self.bob)
        tasks = [{"name": "qa", "dataset": self.dataset.pk, "rubric": self.rubric.pk, "samples_per_prompt": 2}]
        self.suite = Suite.objects.create(team=self.team, name="core", tasks=tasks)
        TrainingSuite.objects.create(
            team=self.team, experiment=self.experiment, suite=self.suite, every_n_checkpoints=2
        )

    def save_checkpoint(self, step: int) -> None:
        folder = model_folder(self.data_dir / "runs" / str(self.run.pk) / f"step-{step}")
        sent = mock.Mock(return_value=mock.Mock(id="task-1"))
        with mock.patch.object(celery_app, "send_task", sent), self.captureOnCommitCallbacks(execute=True):
            Checkpoint.objects.create(run=self.run, step=step, path=str(folder))

    def test_every_second_checkpoint_starts_one_suite_run_on_it(self):
        for step in (5, 10, 15, 20, 20):  # 20 twice: a resumed run saves its step again
            self.save_checkpoint(step)
        runs = SuiteRun.objects.filter(source_run=self.run).order_by("source_step")
        self.assertEqual([r.source_step for r in runs], [10, 20])
        pair = runs[0].results.get()
        self.assertEqual((pair.step, pair.run.spec["eval"]["checkpoint"]), (10, pair.checkpoint))
        self.assertEqual(pair.run.created_by, self.bob)

    def test_a_refused_suite_becomes_a_warning_on_the_training_run(self):
        self.dataset.path = str(self.tmp / "gone.jsonl")  # the file went away since the suite was saved
        self.dataset.row_count = 0
        self.dataset.save()
        for step in (5, 10):
            self.save_checkpoint(step)
        self.assertFalse(SuiteRun.objects.exists())
        [warning] = RunEvent.objects.filter(run=self.run, kind="warning")
        self.assertIn("suite 'core' was not run on the checkpoint of step 10", warning.payload["message"])


def test_suite_curves_have_panels_of_their_own():
    from studio.runs.panels import panel_for

    placed = {key: panel_for(key).id for key in ("suite/sums/pass@1", "suite/sums/pass@4", "suite/sums/reward_mean",
                                                 "suite/sums/pass@1_low", "suite/sums/reward_mean_high")}  # fmt: skip
    assert placed == {"suite/sums/pass@1": "suite_pass", "suite/sums/pass@4": "suite_pass",
                      "suite/sums/reward_mean": "suite_reward", "suite/sums/pass@1_low": "suite_bounds",
                      "suite/sums/reward_mean_high": "suite_bounds"}  # fmt: skip
