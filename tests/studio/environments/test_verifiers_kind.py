"""The verifiers kind in the studio: an editor saves one by its package, pinned version and taskset
config (the form draws those fields from the kind's schema, nothing of the package is installed or run
by the web process), a range or verifiers itself is refused under its field, a viewer cannot save.
The install and the sandboxed taskset are the worker's: tests/trainers/rollout/environments/
test_verifiers_env.py.

alice owns the team, bob edits, carol views (tests/studio/people.py)."""

from __future__ import annotations

import importlib.util

from studio.environments.models import Environment
from studio.experiments.models import Experiment
from studio.runs.models import Run
from tests.studio.base import StudioTestCase

CONFIG = {
    "kind": "verifiers",
    "max_turns": 1,
    "params": {"package": "reverse-text", "version": "0.1.3", "config": {"rows": 50}},
}


class VerifiersEnvironmentTest(StudioTestCase):
    def create(self, user=None, **config):
        payload = {"team": self.team.pk, "name": "reverse", "config": {**CONFIG, **config}}
        return self.client_for(user or self.bob).post("/api/environments/", payload, format="json")

    def test_an_editor_saves_a_pinned_package_with_the_kind_s_defaults(self):
        response = self.create()
        self.assertEqual(response.status_code, 201, response.content)
        params = response.json()["config"]["params"]
        self.assertEqual(
            (params["package"], params["version"], params["config"]), ("reverse-text", "0.1.3", {"rows": 50})
        )
        self.assertEqual((params["max_rows"], params["memory_mb"], params["taskset"]), (1000, 2048, ""))
        self.assertIsNone(importlib.util.find_spec("verifiers"))  # saving installs and runs nothing here

    def test_a_version_range_or_verifiers_itself_is_refused_under_its_field(self):
        ranged = self.create(params={**CONFIG["params"], "version": ">=0.1"}).json()
        self.assertIn("params.version", ranged["config"])
        itself = self.create(params={**CONFIG["params"], "package": "verifiers"}).json()
        self.assertIn("verifiers itself comes with it", str(itself["config"]["params.package"]))
        self.assertFalse(Environment.objects.exists())

    def test_a_viewer_cannot_save_one(self):
        self.assertEqual(self.create(self.carol).status_code, 403)

    def test_the_editor_page_draws_the_package_fields(self):
        self.client.force_login(self.bob)
        page = self.client.post("/environments/new/", {"config.kind": "verifiers", "action": "refresh"})
        self.assertEqual(page.status_code, 200)
        text = page.content.decode()
        for name in (
            "config.params.package",
            "config.params.version",
            "config.params.config",
            "config.params.max_rows",
        ):
            self.assertIn(f'name="{name}"', text)
        self.assertIn("installed into a", text)  # the kind's description says where its code goes


class VerifiersTasksAsPromptsTest(StudioTestCase):
    """An experiment on a verifiers environment may take its prompts from the environment's tasks
    (data.environment_dataset) instead of a dataset: saved and launched without one, the run's spec
    names no data path (the worker reads the tasks when the run starts)."""

    def test_an_experiment_without_a_dataset_launches_on_the_environment_s_tasks(self):
        client = self.client_for(self.bob)
        environment = client.post(
            "/api/environments/", {"team": self.team.pk, "name": "reverse", "config": CONFIG}, format="json"
        ).json()
        body = {"team": self.team.pk, "name": "on-tasks", "rubric": self.rubric.pk, "model_path": "/models/tiny",
                "environment": environment["id"], "config": {"data": {"environment_dataset": True}}}  # fmt: skip
        response = client.post("/api/experiments/", body, format="json")
        self.assertEqual(response.status_code, 201, response.content)
        experiment = Experiment.objects.get(pk=response.json()["id"])
        self.assertTrue(experiment.generates_prompts)
        self.assertEqual(experiment.prompt_source, "the environment's tasks")
        launched = client.post(f"/api/experiments/{experiment.pk}/launch/", {}, format="json")
        self.assertEqual(launched.status_code, 201, launched.content)
        spec = Run.objects.get(pk=launched.json()["id"]).spec
        self.assertIsNone(spec["data"]["path"])
        self.assertTrue(spec["data"]["environment_dataset"])
        self.assertEqual(spec["environment"]["params"]["package"], "reverse-text")

    def test_a_dataset_chosen_beside_the_tasks_is_left_unread(self):
        body = {"team": self.team.pk, "name": "both", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/models/tiny", "config": {"data": {"environment_dataset": True}}}  # fmt: skip
        response = self.client_for(self.bob).post("/api/experiments/", body, format="json")
        self.assertEqual(response.status_code, 201, response.content)  # the dataset is left unread, as for procedural
        self.assertNotIn("path", Experiment.objects.get(name="both").spec_config()["data"])
