"""The worker applies the path policy again right before a run reads anything: files under a folder
the studio accepted at launch may have become links into the data folder since (another team's
checkpoint, the first-login file). The run fails naming the field; the next run trains."""

from __future__ import annotations

import shutil

import pytest

from studio.runs import lifecycle
from studio.runs.models import Rollout, Run
from tests.studio.base import StudioTestCase
from workers.tasks import execute_run

OUTSIDE = "inside the studio's data folder"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from trainers.demos.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


class PathPolicyOnTheWorkerTest(StudioTestCase):
    @pytest.fixture(autouse=True)
    def _model(self, tiny_model):
        self.tiny = tiny_model

    def demo_run(self, data, model) -> Run:
        from trainers.demos.demo import demo_spec

        spec = demo_spec(str(model), data, self.tmp / "out", optim={"total_steps": 1, "prompts_per_step": 2},
                         algorithm={"group_size": 2})  # fmt: skip
        return lifecycle.create_run(self.team, spec, name="demo")

    def test_links_planted_after_launch_fail_the_run_before_it_reads_and_the_next_run_trains(self):
        from trainers.demos.demo import make_demo_dataset

        first_login = self.data_dir / "first-login.txt"
        first_login.write_text('{"prompt": "PASSWORD", "answer": "x"}\n')
        theirs = Run.objects.create(team=self.other_team, name="theirs", spec={}, state="succeeded")
        their_checkpoint = self.data_dir / "runs" / str(theirs.pk) / "checkpoints" / "step-1"
        shutil.copytree(self.tiny, their_checkpoint)
        data = self.tmp / "data"
        data.mkdir()
        make_demo_dataset(data / "train.jsonl")
        model = self.tmp / "model"
        shutil.copytree(self.tiny, model)

        # Launched while every file was real; then a data file and a model file become links.
        data_run, model_run = (
            self.demo_run(data, self.tiny),
            self.demo_run(make_demo_dataset(self.tmp / "d.jsonl"), model),
        )
        (data / "train.jsonl").unlink()
        (data / "train.jsonl").symlink_to(first_login)
        (model / "config.json").unlink()
        (model / "config.json").symlink_to(their_checkpoint / "config.json")
        for run, field in ((data_run, "data.path"), (model_run, "model.path")):
            with self.subTest(field=field):
                self.assertEqual(execute_run(run.pk, "test-worker"), "failed")
                run.refresh_from_db()
                self.assertIn(field, run.error)
                self.assertIn(OUTSIDE, run.error)
                self.assertNotIn("PASSWORD", run.error)
                self.assertFalse(Rollout.objects.filter(run=run).exists())

        good = self.demo_run(make_demo_dataset(self.tmp / "good.jsonl"), self.tiny)
        self.assertEqual(execute_run(good.pk, "test-worker"), "succeeded")
