"""Experiments: settings validated by the trainer's schema, presets, clone, launch."""

from __future__ import annotations

from studio.experiments.models import Experiment
from studio.runs.models import Run, RunEvent
from tests.studio.base import StudioTestCase


class ExperimentsTest(StudioTestCase):
    def body(self, **config):
        return {"team": self.team.pk, "name": "e", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/models/tiny", "config": config}  # fmt: skip

    def test_impossible_settings_are_refused_with_the_field_named(self):
        response = self.client_for(self.bob).post(
            "/api/experiments/", self.body(algorithm={"clip_ratio_low": -1}), format="json"
        )
        self.assertEqual(response.status_code, 400)
        self.assertIn("algorithm.clip_ratio_low", response.json())
        response = self.client_for(self.bob).post(
            "/api/experiments/", self.body(algorithm={"advantage_estimator": "magic"}), format="json"
        )
        self.assertIn("unknown advantage estimator 'magic'", str(response.json()["algorithm.advantage_estimator"]))
        response = self.client_for(self.bob).post("/api/experiments/", self.body(optim={"warp": 9}), format="json")
        self.assertIn("optim.warp", response.json())

    def test_cross_field_rules_of_the_schema_apply(self):
        config = {"algorithm": {"overlong_penalty": True, "overlong_buffer": 64}, "rollout": {"max_new_tokens": 32}}
        response = self.client_for(self.bob).post("/api/experiments/", self.body(**config), format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn("overlong_buffer", str(response.json()))

    def test_a_preset_fills_the_algorithm_and_explicit_values_win(self):
        body = {**self.body(algorithm={"kl_beta": 0.5}), "preset": "dapo"}
        response = self.client_for(self.bob).post("/api/experiments/", body, format="json")
        self.assertEqual(response.status_code, 201, response.content)
        algorithm = response.json()["spec"]["algorithm"]
        self.assertEqual(
            (algorithm["clip_ratio_high"], algorithm["dynamic_sampling"], algorithm["kl_beta"]), (0.28, True, 0.5)
        )

    def test_a_dataset_of_another_team_is_refused(self):
        foreign = self.make_dataset(name="foreign.jsonl", team=self.other_team)
        response = self.client_for(self.bob).post(
            "/api/experiments/", {**self.body(), "dataset": foreign.pk}, format="json"
        )
        self.assertEqual(response.status_code, 400)
        self.assertIn("dataset", response.json())

    def test_clone_copies_the_settings_and_changes_one_thing(self):
        url = f"/api/experiments/{self.experiment.pk}/clone/"
        response = self.client_for(self.bob).post(url, {"config": {"optim": {"lr": 0.001}}}, format="json")
        self.assertEqual(response.status_code, 201, response.content)
        clone = Experiment.objects.get(pk=response.json()["id"])
        self.assertEqual(clone.config["optim"], {"total_steps": 5, "lr": 0.001})
        self.assertEqual((clone.dataset_id, clone.rubric_id), (self.dataset.pk, self.rubric.pk))

    def test_launch_queues_a_run_with_the_validated_spec_and_a_status_event(self):
        response = self.client_for(self.bob).post(
            f"/api/experiments/{self.experiment.pk}/launch/",
            {"overrides": {"optim": {"total_steps": 3}}},
            format="json",
        )
        self.assertEqual(response.status_code, 201, response.content)
        run = Run.objects.get(pk=response.json()["id"])
        self.assertEqual((run.state, run.total_steps, run.spec["optim"]["total_steps"]), ("queued", 3, 3))
        self.assertEqual(run.spec["data"]["path"], self.dataset.path)
        self.assertEqual(RunEvent.objects.get(run=run).payload["state"], "queued")

    def test_launch_refuses_impossible_overrides(self):
        response = self.client_for(self.bob).post(
            f"/api/experiments/{self.experiment.pk}/launch/", {"overrides": {"optim": {"lr": 5}}}, format="json"
        )
        self.assertEqual(response.status_code, 400)
        self.assertIn("optim.lr", response.json())

    def test_schema_endpoints_come_from_the_trainer_library(self):
        client = self.client_for(self.carol)
        self.assertIn("algorithm", client.get("/api/spec-schema/").json()["properties"])
        self.assertIn("grpo", client.get("/api/presets/").json())
        self.assertIn("python", client.get("/api/criterion-kinds/").json())
        self.assertEqual(client.get("/api/schema/").status_code, 200)
