"""Experiment settings that cannot work are refused where they are typed, naming the field, and
nothing is saved or launched: an unknown preset, a model folder that does not exist or holds no
model, a model path that is neither a folder nor a hub id."""

from __future__ import annotations

import socket

from studio.experiments.models import Experiment
from studio.fleet.models import WorkerNode
from studio.runs.models import Run
from tests.studio.base import StudioTestCase


class ExperimentChecksTest(StudioTestCase):
    def create(self, **fields):
        body = {"team": self.team.pk, "name": "new", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "Qwen/Qwen2.5-0.5B", "config": {}, **fields}  # fmt: skip
        return self.client_for(self.bob).post("/api/experiments/", body, format="json")

    def launch(self, overrides):
        url = f"/api/experiments/{self.experiment.pk}/launch/"
        return self.client_for(self.bob).post(url, {"overrides": overrides}, format="json")

    def assert_nothing_saved(self):
        self.assertFalse(Experiment.objects.filter(name="new").exists())
        self.assertFalse(Run.objects.exists())

    def test_an_unknown_preset_is_refused_listing_the_known_ones(self):
        response = self.create(preset="grpoo")
        self.assertEqual(response.status_code, 400)
        self.assertIn("known presets: grpo, dr_grpo", response.json()["preset"][0])
        response = self.create(config={"algorithm": {"preset": "grpoo"}})
        self.assertEqual(response.status_code, 400)
        self.assertIn("unknown preset 'grpoo'; valid: grpo", response.json()["algorithm.preset"][0])
        self.assertEqual(self.launch({"algorithm": {"preset": "grpoo"}}).status_code, 400)
        self.assert_nothing_saved()

    def test_a_missing_model_folder_under_the_shared_folders_is_refused_by_name(self):
        missing = self.tmp / "models" / "gone"
        response = self.create(model_path=str(missing))
        self.assertEqual(response.status_code, 400)
        self.assertEqual(response.json()["model.path"], [f"folder {missing} does not exist"])
        response = self.launch({"model": {"ref_path": str(missing)}})
        self.assertEqual(response.status_code, 400)
        self.assertEqual(response.json()["model.ref_path"], f"folder {missing} does not exist")
        self.assert_nothing_saved()

    def test_a_folder_without_a_config_is_not_a_model_folder(self):
        (self.tmp / "notes").mkdir()
        response = self.create(model_path=str(self.tmp / "notes"))
        self.assertEqual(response.status_code, 400)
        self.assertEqual(
            response.json()["model.path"], [f"{self.tmp / 'notes'} has no config.json: not a model folder"]
        )
        self.assert_nothing_saved()

    def test_a_path_that_is_neither_a_folder_nor_a_hub_id_is_refused_plainly(self):
        response = self.create(model_path="my model")
        self.assertEqual(response.status_code, 400)
        self.assertIn("not a local folder", response.json()["model.path"][0])
        self.assertIn("not a hub id", response.json()["model.path"][0])
        self.assert_nothing_saved()

    def test_hub_ids_and_folders_only_the_workers_see_are_left_to_the_worker(self):
        for path in ("Qwen/Qwen2.5-0.5B", "/models/on-the-gpu-machine"):
            with self.subTest(path=path):
                self.assertEqual(self.create(model_path=path, name=path).status_code, 201)

    def test_with_a_worker_on_this_machine_any_missing_folder_is_refused(self):
        WorkerNode.record_start(f"gpu@{socket.gethostname()}", ["gpu"], [], 1)
        response = self.create(model_path="/models/on-the-gpu-machine")
        self.assertEqual(response.status_code, 400)
        self.assertIn("folder /models/on-the-gpu-machine does not exist", response.json()["model.path"][0])
        WorkerNode.record_stop(f"gpu@{socket.gethostname()}")
        self.assertEqual(self.create(model_path="/models/on-the-gpu-machine").status_code, 201)

    def test_the_experiment_form_names_the_missing_folder_and_saves_nothing(self):
        self.client.force_login(self.bob)
        missing = self.tmp / "models" / "gone"
        body = {"team": self.team.pk, "name": "new", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": str(missing), "optim.total_steps": "7"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response.context["errors"]["model.path"], f"folder {missing} does not exist")
        self.assertContains(response, f"folder {missing} does not exist")
        self.assert_nothing_saved()

    def test_the_form_sets_when_failing_criteria_warn_and_stop_the_run(self):
        self.client.force_login(self.bob)
        self.assertContains(self.client.get("/experiments/new/"), 'name="reward.stop_after_failing_steps"')
        body = {"team": self.team.pk, "name": "new", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "Qwen/Qwen2.5-0.5B", "reward.failure_warn_share": "0.25",
                "reward.stop_after_failing_steps": "3"}  # fmt: skip
        self.client.post("/experiments/new/", body)
        saved = Experiment.objects.get(name="new")
        self.assertEqual(saved.config["reward"], {"failure_warn_share": 0.25, "stop_after_failing_steps": 3})
