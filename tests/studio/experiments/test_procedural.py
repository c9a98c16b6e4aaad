"""Experiments whose prompts are generated (data.procedural): saved, shown in the form, launched
without reading the dataset."""

from __future__ import annotations

from studio.datasets.models import CHECKING
from studio.experiments.models import Experiment
from studio.runs.models import Run
from tests.studio.base import StudioTestCase

PROCEDURAL = {"task": "sorting", "max_difficulty": 4, "target_band": [0.3, 0.6]}


class ProceduralExperimentsTest(StudioTestCase):
    def body(self, **data):
        return {"team": self.team.pk, "name": "gen", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/models/tiny", "config": {"data": data}}  # fmt: skip

    def test_an_experiment_generating_its_prompts_launches_a_run_without_a_data_path(self):
        response = self.client_for(self.bob).post("/api/experiments/", self.body(procedural=PROCEDURAL), format="json")
        self.assertEqual(response.status_code, 201, response.content)
        experiment = Experiment.objects.get(pk=response.json()["id"])
        # A dataset still being checked does not hold back a run that never reads it.
        self.dataset.status = CHECKING
        self.dataset.save()
        launched = self.client_for(self.bob).post(f"/api/experiments/{experiment.pk}/launch/", {}, format="json")
        self.assertEqual(launched.status_code, 201, launched.content)
        data = Run.objects.get(pk=launched.json()["id"]).spec["data"]
        self.assertIsNone(data["path"])
        self.assertEqual((data["procedural"]["task"], data["procedural"]["target_band"]), ("sorting", [0.3, 0.6]))

    def test_a_bad_procedural_setting_is_refused_with_its_field_named(self):
        body = self.body(procedural={**PROCEDURAL, "task": "chess"})
        response = self.client_for(self.bob).post("/api/experiments/", body, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn("unknown procedural task 'chess'", str(response.json()["data.procedural.task"]))

    def test_the_form_offers_procedural_prompts_and_saves_them(self):
        self.client.force_login(self.bob)
        page = self.client.get("/experiments/new/").content.decode()
        self.assertIn('name="data.procedural"', page)
        self.assertIn("Generate the prompts (with an adaptive difficulty) instead of reading a dataset.", page)
        body = {"team": self.team.pk, "name": "gen-form", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "data.procedural": '{"task": "reverse", "start_difficulty": 2}'}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        saved = Experiment.objects.get(name="gen-form")
        self.assertRedirects(response, f"/experiments/{saved.pk}/", fetch_redirect_response=False)
        self.assertEqual(saved.config["data"]["procedural"], {"task": "reverse", "start_difficulty": 2})
        self.assertNotIn("path", saved.spec_config()["data"])

    def test_a_dataset_experiment_still_reads_its_dataset(self):
        self.assertEqual(self.experiment.spec_config()["data"]["path"], self.dataset.path)
        self.assertFalse(self.experiment.generates_prompts)
