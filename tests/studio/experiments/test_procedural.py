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


class ExperimentsWithoutADatasetTest(StudioTestCase):
    """The dataset is optional exactly when the settings generate the prompts."""

    def body(self, **fields):
        return {"team": self.team.pk, "name": "gen", "rubric": self.rubric.pk, "model_path": "/models/tiny",
                "config": {"data": {"procedural": PROCEDURAL}}, **fields}  # fmt: skip

    def generated(self) -> Experiment:
        return Experiment.objects.create(team=self.team, name="Gen", rubric=self.rubric, model_path="/models/tiny",
                                         config={"data": {"procedural": PROCEDURAL}}, created_by=self.alice)  # fmt: skip

    def test_the_api_creates_and_launches_a_procedural_experiment_without_a_dataset(self):
        for body in (self.body(), self.body(dataset=None)):
            response = self.client_for(self.bob).post("/api/experiments/", body, format="json")
            self.assertEqual(response.status_code, 201, response.content)
            self.assertIsNone(response.json()["dataset"])
            self.assertEqual(response.json()["spec"]["data"]["procedural"]["task"], "sorting")
        experiment = Experiment.objects.filter(dataset=None).first()
        launched = self.client_for(self.bob).post(f"/api/experiments/{experiment.pk}/launch/", {}, format="json")
        self.assertEqual(launched.status_code, 201, launched.content)
        cloned = self.client_for(self.bob).post(f"/api/experiments/{experiment.pk}/clone/", {}, format="json")
        self.assertEqual(cloned.status_code, 201, cloned.content)
        self.assertIsNone(cloned.json()["dataset"])

    def test_the_api_refuses_a_missing_dataset_for_an_experiment_reading_one(self):
        for body in (self.body(config={}), self.body(config={}, dataset=None)):
            response = self.client_for(self.bob).post("/api/experiments/", body, format="json")
            self.assertEqual(response.status_code, 400)
            self.assertIn("choose a dataset", str(response.json()["dataset"]))
        # Turning generation off on an experiment without a dataset is refused the same way.
        experiment = self.generated()
        patched = self.client_for(self.bob).patch(f"/api/experiments/{experiment.pk}/", {"config": {}}, format="json")
        self.assertEqual(patched.status_code, 400)
        self.assertIn("choose a dataset", str(patched.json()["dataset"]))
        self.assertEqual(Experiment.objects.count(), 2)  # setUp's and this one: nothing was saved

    def test_a_given_dataset_is_still_checked_for_a_procedural_experiment(self):
        theirs = self.make_dataset(name="theirs.jsonl", team=self.other_team)
        response = self.client_for(self.bob).post("/api/experiments/", self.body(dataset=theirs.pk), format="json")
        self.assertEqual(response.status_code, 400)
        self.assertEqual(response.json()["dataset"], ["must belong to the same team"])

    def test_the_form_saves_a_procedural_experiment_with_no_dataset_and_refuses_a_normal_one(self):
        self.client.force_login(self.bob)
        form = {"team": self.team.pk, "rubric": self.rubric.pk, "model_path": "/m", "dataset": ""}
        body = {**form, "name": "gen-form", "data.procedural": '{"task": "reverse"}'}
        response = self.client.post("/experiments/new/", body)
        saved = Experiment.objects.get(name="gen-form")
        self.assertRedirects(response, f"/experiments/{saved.pk}/", fetch_redirect_response=False)
        self.assertIsNone(saved.dataset)
        refused = self.client.post("/experiments/new/", {**form, "name": "plain"})
        self.assertEqual(refused.status_code, 200)
        self.assertIn("choose a dataset", refused.context["errors"]["dataset"])
        self.assertEqual(refused.context["placed"].meta["dataset"][:16], "choose a dataset")  # beside the Dataset field
        self.assertContains(refused, '<label class="has-error" data-meta-error="dataset">Dataset')
        self.assertFalse(Experiment.objects.filter(name="plain").exists())

    def test_the_pages_say_the_prompts_are_generated(self):
        experiment = self.generated()
        run = Run.objects.create(team=self.team, experiment=experiment, name="gen run", spec=experiment.spec_config())
        self.client.force_login(self.bob)
        listing = self.client.get("/experiments/")
        self.assertContains(listing, "<td>generated: sorting</td>", html=False)
        self.assertContains(listing, f"<td>{self.dataset.name}</td>")  # setUp's experiment reads its dataset
        detail = self.client.get(f"/experiments/{experiment.pk}/")
        self.assertContains(detail, "prompts generated: sorting")
        self.assertNotContains(detail, "dataset <a")
        for url in (f"/experiments/{experiment.pk}/edit/", f"/experiments/new/?clone={experiment.pk}"):
            edit = self.client.get(url)
            self.assertContains(edit, '<option value="" selected>— none: the settings generate the prompts')
        # A new form selects nothing, so the browser starts on the first option: a dataset, not none.
        new = self.client.get("/experiments/new/").content.decode()
        self.assertLess(new.index(f'<option value="{self.dataset.pk}" >'), new.index('<option value="" >— none: the'))
        for url in (f"/runs/{run.pk}/", "/runs/", f"/compare/?runs={run.pk}", f"/share/{self.share(run)}/"):
            self.assertEqual(self.client.get(url).status_code, 200, url)

    def share(self, run: Run) -> str:
        from studio.sharing.models import ShareLink

        return ShareLink.objects.create(run=run, created_by=self.alice).token
