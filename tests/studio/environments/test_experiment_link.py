"""An experiment optionally names an environment, pinned to a version: the RunSpec of its runs
gets that version's config as `environment`; editing the environment changes no experiment
until it is pinned again."""

from __future__ import annotations

from studio.environments.models import Environment
from studio.experiments import services
from studio.runs.models import Run
from tests.studio.base import StudioTestCase
from tests.studio.environment_kind import CONFIG


class ExperimentEnvironmentTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        response = self.client_for(self.bob).post(
            "/api/environments/", {"team": self.team.pk, "name": "countdown", "config": CONFIG}, format="json"
        )
        self.environment = Environment.objects.get(pk=response.json()["id"])

    def experiment_url(self) -> str:
        return f"/api/experiments/{self.experiment.pk}/"

    def test_an_experiment_with_an_environment_launches_runs_whose_spec_has_its_pinned_config(self):
        client = self.client_for(self.bob)
        chosen = client.patch(self.experiment_url(), {"environment": self.environment.pk}, format="json").json()
        self.assertEqual(chosen["environment_version"], 1)
        self.assertEqual(chosen["spec"]["environment"]["params"], {"word": "stop", "start": 3})
        # The environment changes: the experiment stays on version 1 ...
        client.patch(f"/api/environments/{self.environment.pk}/", {"config": {**CONFIG, "max_turns": 6}}, format="json")
        run = client.post(f"{self.experiment_url()}launch/", {}, format="json").json()
        self.assertEqual(Run.objects.get(pk=run["id"]).spec["environment"]["max_turns"], 3)
        # ... until pinned again: null asks for the latest.
        moved = client.patch(self.experiment_url(), {"environment_version": None}, format="json").json()
        self.assertEqual((moved["environment_version"], moved["spec"]["environment"]["max_turns"]), (2, 6))

    def test_an_experiment_without_an_environment_is_single_turn(self):
        spec = self.client_for(self.bob).get(self.experiment_url()).json()["spec"]
        self.assertIsNone(spec["environment"])

    def test_a_version_that_does_not_exist_is_refused_naming_the_field(self):
        body = {"environment": self.environment.pk, "environment_version": 7}
        response = self.client_for(self.bob).patch(self.experiment_url(), body, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn("has versions 1 to 1", str(response.json()["environment_version"]))

    def test_another_teams_environment_cannot_be_chosen_or_launched(self):
        theirs = Environment.objects.create(team=self.other_team, name="theirs", config=CONFIG)
        theirs.record_version(self.charlie)
        response = self.client_for(self.bob).patch(self.experiment_url(), {"environment": theirs.pk}, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn("same team", str(response.json()["environment"]))
        # A row changed behind the API's back: the launch is refused, and no run is made.
        self.experiment.environment, self.experiment.environment_version = theirs, 1
        self.experiment.save()
        with self.assertRaises(services.LaunchError) as refused:
            services.launch(self.experiment, self.bob)
        self.assertIn("environment", refused.exception.errors)
        self.assertEqual(Run.objects.count(), 0)

    def test_an_environment_that_experiments_use_cannot_be_deleted(self):
        self.client_for(self.bob).patch(self.experiment_url(), {"environment": self.environment.pk}, format="json")
        response = self.client_for(self.bob).delete(f"/api/environments/{self.environment.pk}/")
        self.assertEqual(response.status_code, 409)
        self.assertIn('experiment "Exp"', response.json()["detail"])

    def test_the_experiment_form_offers_environments_and_saves_the_choice(self):
        self.client.force_login(self.bob)
        page = self.client.get("/experiments/new/").content.decode()
        self.assertIn(f'<option value="{self.environment.pk}"', page)
        body = {"team": self.team.pk, "name": "agent", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "environment": self.environment.pk, "environment_version": "", "model_path": "/m",
                "optim.total_steps": "7"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        self.assertEqual(response.status_code, 302, response.context and response.context["errors"])
        made = self.environment.experiments.get(name="agent")
        self.assertEqual(made.environment_version, 1)
