"""The files a run may read: a team's runs read its own datasets and run outputs, never the
studio's data folder otherwise (its secrets, other teams' uploads and checkpoints).

Paths outside the data folder (a server admin's model folder, a hub id) stay allowed.
"""

from __future__ import annotations

from studio.datasets.models import Dataset
from studio.experiments.models import Experiment
from studio.runs.models import Checkpoint, Run
from tests.studio.base import ROWS, StudioTestCase, model_folder, write_jsonl

OUTSIDE = "inside the studio's data folder"


class RunPathsTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.theirs = Run.objects.create(team=self.other_team, name="theirs", spec={}, state="succeeded")
        self.their_checkpoint = self.data_dir / "runs" / str(self.theirs.pk) / "checkpoints" / "step-1"

    def launch(self, overrides, user=None, **body):
        url = f"/api/experiments/{self.experiment.pk}/launch/"
        return self.client_for(user or self.bob).post(url, {"overrides": overrides, **body}, format="json")

    def test_launch_refuses_another_teams_upload_as_data(self):
        upload = self.data_dir / "datasets" / "0f3a" / "theirs.jsonl"
        upload.parent.mkdir(parents=True)
        write_jsonl(upload, ROWS)
        Dataset.objects.create(team=self.other_team, name="theirs", source="upload", path=str(upload), format="jsonl")
        for path in (upload, self.data_dir / "secret_key"):
            with self.subTest(path=path.name):
                response = self.launch({"data": {"path": str(path)}})
                self.assertEqual(response.status_code, 400)
                self.assertIn("not one of this team's datasets", response.json()["data.path"])
        self.assertFalse(Run.objects.filter(team=self.team).exists())

    def test_a_held_out_validation_dataset_is_checked_like_the_training_data(self):
        upload = self.data_dir / "datasets" / "77aa" / "their_val.jsonl"
        upload.parent.mkdir(parents=True)
        write_jsonl(upload, ROWS)
        Dataset.objects.create(
            team=self.other_team, name="their val", source="upload", path=str(upload), format="jsonl"
        )
        response = self.launch({"validation": {"path": str(upload)}})
        self.assertEqual(response.status_code, 400)
        self.assertIn("not one of this team's datasets", response.json()["validation.path"])
        response = self.launch({"validation": {"path": str(self.tmp / "v.jsonl"), "split": "../train"}})
        self.assertIn("a split is a name", response.json()["validation.split"])
        self.assertFalse(Run.objects.filter(team=self.team).exists())
        held_out = write_jsonl(self.tmp / "held_out.jsonl", ROWS)
        response = self.launch({"validation": {"path": str(held_out), "every_n_steps": 5}})
        self.assertEqual(response.status_code, 201)
        self.assertEqual(Run.objects.get(pk=response.json()["id"]).spec["validation"]["path"], str(held_out))

    def test_launch_accepts_a_file_a_dataset_could_be_registered_from(self):
        path = write_jsonl(self.tmp / "more.jsonl", ROWS)
        self.assertEqual(self.launch({"data": {"path": str(path)}}).status_code, 201)

    def test_model_and_checkpoint_paths_cannot_read_another_teams_run(self):
        fields = {
            "model.path": {"model": {"path": str(self.their_checkpoint)}},
            "model.ref_path": {"model": {"ref_path": str(self.their_checkpoint)}},
            "checkpoint.resume_from": {"checkpoint": {"resume_from": str(self.their_checkpoint)}},
            "eval.checkpoint": {"eval": {"checkpoint": str(self.their_checkpoint)}},
        }
        for field, overrides in fields.items():
            with self.subTest(field=field):
                response = self.launch(overrides)
                self.assertEqual(response.status_code, 400)
                self.assertIn(OUTSIDE, response.json()[field])
        self.assertFalse(Run.objects.filter(team=self.team).exists())

    def test_the_data_folders_own_files_are_refused_by_relative_paths_too(self):
        with self.settings(BASE_DIR=self.tmp):  # the repository holds var/, as in a checkout
            for raw in ("var/secret_key", "var/runs/../studio.sqlite3", "./var"):
                with self.subTest(path=raw):
                    response = self.launch({"model": {"path": raw}})
                    self.assertEqual(response.status_code, 400)
                    self.assertIn(OUTSIDE, response.json()["model.path"])

    def test_own_runs_the_demo_folder_hub_ids_and_outside_folders_are_allowed(self):
        mine = Run.objects.create(team=self.team, name="mine", spec={}, state="succeeded")
        own, demo = self.data_dir / "runs" / str(mine.pk) / "checkpoints" / "step-2", self.data_dir / "demo" / "tiny"
        for folder in (own, demo):  # the studio shares the data folder with its workers, so it checks them
            model_folder(folder)
        allowed = {
            "own run": {"model": {"path": str(own)}},
            "demo model": {"model": {"path": str(demo)}},
            "hub id": {"model": {"path": "Qwen/Qwen2.5-0.5B"}},
            "admin's folder": {"model": {"path": "/models/llama"}},
            "latest": {"checkpoint": {"resume_from": "latest"}},
        }
        for what, overrides in allowed.items():
            with self.subTest(what=what):
                response = self.launch(overrides)
                self.assertEqual(response.status_code, 201, response.content)

    def test_run_clone_refuses_another_teams_checkpoint(self):
        run = self.make_run(state="succeeded")
        response = self.client_for(self.bob).post(
            f"/api/runs/{run.pk}/clone/", {"overrides": {"eval": {"checkpoint": str(self.their_checkpoint)}}},
            format="json",
        )  # fmt: skip
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["eval.checkpoint"])

    def test_experiments_cannot_be_saved_with_a_model_in_the_data_folder(self):
        body = {"team": self.team.pk, "name": "e", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": str(self.data_dir), "config": {}}  # fmt: skip
        response = self.client_for(self.bob).post("/api/experiments/", body, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["model.path"][0])
        body.update(model_path="/models/tiny", config={"model": {"ref_path": str(self.their_checkpoint)}})
        response = self.client_for(self.bob).patch(f"/api/experiments/{self.experiment.pk}/", body, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["model.ref_path"][0])

    def test_the_experiment_page_refuses_a_model_in_the_data_folder(self):
        self.client.force_login(self.bob)
        body = {"team": self.team.pk, "name": "page", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": str(self.data_dir / "secret_key"), "optim.total_steps": "7"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        self.assertEqual(response.status_code, 200)
        self.assertIn(OUTSIDE, response.context["errors"]["model.path"])
        self.assertFalse(Experiment.objects.filter(name="page").exists())

    def test_resume_and_evaluate_read_the_runs_own_checkpoints(self):
        run = self.make_run(state="succeeded")
        path = model_folder(self.data_dir / "runs" / str(run.pk) / "checkpoints" / "step-4")
        Checkpoint.objects.create(run=run, step=4, path=str(path))
        for action in ("resume", "evaluate"):
            with self.subTest(action=action):
                self.assertEqual(self.client_for(self.bob).post(f"/api/runs/{run.pk}/{action}/").status_code, 201)
        checkpoint = Checkpoint.objects.get(run=run)
        response = self.launch({}, kind="eval", checkpoint=checkpoint.pk)
        self.assertEqual(response.status_code, 201, response.content)
        self.assertEqual(Run.objects.get(pk=response.json()["id"]).spec["eval"]["checkpoint"], str(path))

    def test_resume_refuses_a_run_whose_stored_settings_read_another_team(self):
        run = self.make_run(state="succeeded")  # as if saved before the path rules existed
        run.spec["model"]["path"] = str(self.their_checkpoint)
        run.save()
        Checkpoint.objects.create(run=run, step=1, path=str(self.data_dir / "runs" / str(run.pk) / "step-1"))
        response = self.client_for(self.bob).post(f"/api/runs/{run.pk}/resume/")
        self.assertEqual(response.status_code, 409)
        self.assertIn("model.path", response.json()["detail"])
