"""The second hour (issue 27): an experiment's errors beside their fields in words; a hub id checked
when it is saved; the token limits meaning one thing, and the step cost following them; a dataset
with invalid rows refused where it is chosen; the sign-in page naming the real first-login file;
a clone saying what it is a clone of."""

from __future__ import annotations

import os
import tempfile
from dataclasses import astuple
from pathlib import Path
from unittest import mock

from studio.environments.models import Environment
from studio.experiments import forms
from studio.experiments.layout import StepCost, place_errors
from studio.experiments.models import Experiment
from tests.studio.base import StudioTestCase
from trainers.spec import token_bounds

LOOKUP = {"kind": "lookup", "params": {}, "max_turns": 4, "max_turn_tokens": 256, "max_episode_tokens": 1024}


class HubIdsTest(StudioTestCase):
    def create(self, model_path: str, **fields):
        body = {"team": self.team.pk, "name": "hub", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": model_path, "config": {}, **fields}  # fmt: skip
        return self.client_for(self.bob).post("/api/experiments/", body, format="json")

    def test_a_well_formed_hub_id_is_saved_and_the_form_says_the_worker_downloads_it(self):
        with mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": ""}):
            response = self.create("Qwen/Qwen2.5-0.5B")
            self.assertEqual(response.status_code, 201, response.content)
            self.client.force_login(self.bob)
            page = self.client.get(f"/experiments/{response.json()['id']}/edit/")
        self.assertIn("the worker downloads it from the Hugging Face Hub", page.context["model_note"])
        self.assertContains(page, "data-model-note")
        folder = self.client.get(f"/experiments/{self.experiment.pk}/edit/")  # /models/tiny: a folder, no note
        self.assertEqual(folder.context["model_note"], "")

    def test_what_is_neither_a_folder_nor_a_hub_id_is_refused_with_the_hubs_rules(self):
        for path in ("gpt2", "org/-name", "org/name-", "org/na--me", "org/name.git", "org/ná", "a b/c"):
            with self.subTest(path=path):
                response = self.create(path)
                self.assertEqual(response.status_code, 400)
                message = response.json()["model.path"][0]
                self.assertIn("not a local folder", message)
                self.assertIn("a hub id is owner/name", message)
        self.assertFalse(Experiment.objects.filter(name="hub").exists())

    def test_with_the_hub_switched_off_a_hub_id_not_in_the_cache_is_refused_when_saved(self):
        with mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "1"}):
            response = self.create("studio-tests/not-cached")
            self.assertEqual(response.status_code, 400)
            message = response.json()["model.path"][0]
            self.assertIn("HF_HUB_OFFLINE is set", message)
            self.assertIn("Put the model in a folder the studio can read and give its path", message)
            launch = self.client_for(self.bob).post(f"/api/experiments/{self.experiment.pk}/launch/",
                                                    {"overrides": {"model": {"path": "studio-tests/not-cached"}}},
                                                    format="json")  # fmt: skip
            self.assertEqual(launch.status_code, 400)
            self.assertIn("HF_HUB_OFFLINE is set", launch.json()["model.path"])


class ErrorsBesideTheirFieldsTest(StudioTestCase):
    def test_a_missing_model_folder_shows_beside_the_model_field_in_words_not_at_the_top(self):
        self.client.force_login(self.bob)
        missing = self.tmp / "models" / "gone"
        body = {"team": self.team.pk, "name": "e", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": str(missing)}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        self.assertEqual(response.status_code, 200)
        placed = response.context["placed"]
        self.assertEqual((placed.meta, placed.beside, placed.top), ({"model_path": f"folder {missing} does not exist"},
                                                                    {}, []))  # fmt: skip
        self.assertContains(response, 'data-meta-error="model_path">Model (local folder or hub id)')
        self.assertContains(response, f'<small class="error">folder {missing} does not exist</small></label>')
        self.assertNotContains(response, "<b>model.path</b>")

    def test_the_experiments_page_names_settings_that_cannot_run_by_their_labels_not_their_paths(self):
        self.client.force_login(self.bob)
        page = f"/experiments/{self.experiment.pk}/"
        config = self.experiment.config
        Experiment.objects.filter(pk=self.experiment.pk).update(config={**config, "rollout": {"max_new_tokens": 0}})
        response = self.client.get(page)
        [(label, message)] = response.context["spec_errors"]
        self.assertEqual(label, "Generation › max new tokens")
        self.assertContains(response, f'href="/experiments/{self.experiment.pk}/edit/"')
        self.assertNotContains(response, "<b>rollout.max_new_tokens</b>")
        missing = self.tmp / "models" / "moved"  # saved once, then its folder moved away
        Experiment.objects.filter(pk=self.experiment.pk).update(config=config, model_path=str(missing))
        response = self.client.get(page)
        self.assertEqual(response.context["spec_errors"], [("Model", f"folder {missing} does not exist")])
        self.assertNotContains(response, "<b>model.path</b>")

    def test_an_error_in_a_collapsed_section_shows_beside_its_field_with_the_section_open(self):
        self.client.force_login(self.bob)
        body = {"team": self.team.pk, "name": "e", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/models/tiny", "validation.path": "held.jsonl", "validation.holdout_fraction": "0.1"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        placed = response.context["placed"]
        self.assertIn("not both", placed.beside["validation.holdout_fraction"])
        self.assertEqual((placed.meta, placed.top), ({}, []))
        validation = next(g for g in response.context["groups"] if g.key == "validation")
        self.assertTrue(validation.has_error)
        self.assertContains(response, 'data-group="validation" open')

    def test_errors_go_beside_their_field_a_part_beside_its_field_and_the_rest_to_the_top_in_words(self):
        sections = forms.experiment_sections({}, {})
        placed = place_errors({
            "model.path": "folder /x does not exist",
            "optim.lr": "must be a number",
            "data.procedural.task": "unknown task 'x'",
            "config.algorithm.kl_beta": "too big",
            "__all__": "algorithm.overlong_buffer must be smaller than rollout.max_new_tokens",
            "curriculum": "the knapsack budget of 9 rollouts per step cannot give each prompt 2",
            "data.prompt_field": "missing",
            "non_field_errors": "something general",
        }, sections)  # fmt: skip
        self.assertEqual(placed.meta, {"model_path": "folder /x does not exist", "dataset": "missing"})
        self.assertEqual(placed.beside, {
            "optim.lr": "must be a number", "data.procedural": "task: unknown task 'x'", "algorithm.kl_beta": "too big",
            "algorithm.overlong_buffer": "“overlong buffer” must be smaller than “max new tokens”",
        })  # fmt: skip
        self.assertEqual(placed.top, [("Curriculum", "the knapsack budget of 9 rollouts per step cannot give each prompt 2"),
                                      ("", "something general")])  # fmt: skip
        self.assertEqual(placed.count, 8)


class TokenLimitsTest(StudioTestCase):
    def test_the_rule_by_hand(self):
        # No environment: one turn of max_new_tokens.
        self.assertEqual(astuple(token_bounds(32)), (32, 32, 32))
        # The reported case: max_new_tokens 32 in an environment allowing 256 per turn, 4 turns, 1024 per
        # episode: each turn 32, at most 4 x 32 = 128 sampled, up to 1024 after the prompt with observations.
        self.assertEqual(astuple(token_bounds(32, 4, 256, 1024)), (32, 128, 1024))
        # The environment's per-turn limit is smaller: it wins; the episode budget caps the sampled tokens.
        self.assertEqual(astuple(token_bounds(64, 4, 48, 100)), (48, 100, 100))
        # One turn: nothing follows it, so what is sampled is all there is.
        self.assertEqual(astuple(token_bounds(64, 1, 256, 1024)), (64, 64, 64))

    def test_the_step_cost_follows_the_environment_the_form_names(self):
        environment = Environment.objects.create(team=self.team, name="boxes", config=LOOKUP, created_by=self.alice)
        config = {"rollout": {"max_new_tokens": 32}, "optim": {"prompts_per_step": 8}, "algorithm": {"group_size": 8}}
        Experiment.objects.filter(pk=self.experiment.pk).update(environment=environment, environment_version=1,
                                                                config=config)  # fmt: skip
        self.client.force_login(self.bob)
        page = self.client.get(f"/experiments/{self.experiment.pk}/edit/")
        cost = page.context["step_cost"]
        self.assertEqual(cost, StepCost(prompts=8, group=8, new_tokens=32, prompt_tokens=512, max_turns=4,
                                        max_turn_tokens=256, max_episode_tokens=1024))  # fmt: skip
        # 8 prompts x 8 samples = 64 episodes; each samples at most 4 turns x 32 tokens = 128 (not 4 x 256),
        # and holds at most 1024 tokens after its 512-token prompt.
        self.assertEqual((cost.generated, cost.trained), (64 * 128, 64 * (512 + 1024)))
        self.assertEqual({k: cost.shown[k] for k in ("generated", "trained", "turns", "turn_tokens", "episode_tokens")},
                         {"generated": "8,192", "trained": "98,304", "turns": "4", "turn_tokens": "32",
                          "episode_tokens": "1,024"})  # fmt: skip
        self.assertEqual(page.context["form_rules"]["environments"][str(environment.pk)]["versions"]["1"],
                         {"max_turns": 4, "max_turn_tokens": 256, "max_episode_tokens": 1024})  # fmt: skip
        # Without the environment: one turn of 32 tokens.
        self.assertEqual(StepCost(prompts=8, group=8, new_tokens=32, prompt_tokens=512).generated, 64 * 32)


INVALID = [{"prompt": "What is 2+2?", "answer": "4"}, {"answer": "5"}, "{not json", {"prompt": "", "answer": "7"}]


class InvalidRowsTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.bad = self.make_dataset(INVALID, name="bad.jsonl")

    def create(self, **config):
        body = {"team": self.team.pk, "name": "on bad rows", "dataset": self.bad.pk, "rubric": self.rubric.pk,
                "model_path": "/models/tiny", "config": config}  # fmt: skip
        return self.client_for(self.bob).post("/api/experiments/", body, format="json")

    def test_the_dataset_says_how_many_rows_are_invalid_on_its_page_and_in_the_list(self):
        self.assertEqual((self.bad.row_count, self.bad.error_count, self.bad.valid_rows), (4, 3, 1))
        self.client.force_login(self.bob)
        self.assertContains(self.client.get("/datasets/"), "3 of 4 rows invalid")
        page = self.client.get(f"/datasets/{self.bad.pk}/")
        self.assertContains(page, "3 of 4 rows invalid")
        self.assertContains(page, "fix these rows in the file (or drop them)")
        self.assertEqual(self.client_for(self.bob).get(f"/api/datasets/{self.bad.pk}/").json()["valid_rows"], 1)

    def test_it_is_refused_where_it_is_chosen_naming_the_rows_and_what_to_do(self):
        response = self.create()
        self.assertEqual(response.status_code, 400)
        message = response.json()["dataset"][0]
        self.assertTrue(message.startswith("3 of 4 rows invalid in 'bad.jsonl' (row 2, field 'prompt': missing; row 3: "),
                        message)  # fmt: skip
        self.assertIn("Fix those rows in the file (or drop them) and add it again", message)
        self.assertIn("to train on the 1 valid row only", message)
        self.assertNotIn("mapping", message)  # the rows are broken; no field mapping mends them
        # The form says it beside the Dataset field, and the dataset list says it in the choice.
        self.client.force_login(self.bob)
        form = {"team": self.team.pk, "name": "on bad rows", "dataset": self.bad.pk, "rubric": self.rubric.pk,
                "model_path": "/models/tiny"}  # fmt: skip
        page = self.client.post("/experiments/new/", form)
        self.assertIn("3 of 4 rows invalid", page.context["placed"].meta["dataset"])
        self.assertContains(page, "bad.jsonl (Alice&#x27;s team) — 3 of 4 rows invalid")
        self.assertFalse(Experiment.objects.filter(name="on bad rows").exists())

    def test_leaving_the_invalid_rows_out_is_saved_launched_and_read_so(self):
        from trainers.data.prompts import load_rows
        from trainers.spec import DataSpec

        response = self.create(data={"skip_invalid_rows": True})
        self.assertEqual(response.status_code, 201, response.content)
        launched = self.client_for(self.bob).post(f"/api/experiments/{response.json()['id']}/launch/")
        self.assertEqual(launched.status_code, 201, launched.content)
        rows = load_rows(DataSpec(**self.bad.data_spec(), skip_invalid_rows=True))
        self.assertEqual([row.row for row in rows], [1])

    def test_a_dataset_without_one_valid_row_is_refused_even_when_invalid_rows_are_left_out(self):
        none = self.make_dataset([{"answer": "1"}, "{"], name="none.jsonl")
        response = self.create(data={"skip_invalid_rows": True})
        self.assertEqual(response.status_code, 201)
        body = {"dataset": none.pk}
        refused = self.client_for(self.bob).patch(f"/api/experiments/{response.json()['id']}/", body, format="json")
        self.assertEqual(refused.status_code, 400)
        self.assertTrue(refused.json()["dataset"][0].startswith("no row can be used: 2 of 2 rows invalid"))


class SignInAndCloneTest(StudioTestCase):
    def test_the_sign_in_page_names_the_first_login_file_where_it_really_is(self):
        elsewhere = Path(tempfile.mkdtemp(prefix="studio-data-elsewhere-")).resolve()
        with self.settings(DATA_DIR=elsewhere):
            self.assertNotContains(self.client.get("/login/"), "first-login.txt")  # not there: not named
            (elsewhere / "first-login.txt").write_text("username: admin\n")
            page = self.client.get("/login/")
        self.assertContains(page, f"<code data-first-login-file>{elsewhere / 'first-login.txt'}</code>")
        self.assertNotContains(page, "var/first-login.txt")
        with self.settings(BASE_DIR=self.tmp):  # the data folder inside the studio's folder: shown relative
            (self.data_dir / "first-login.txt").write_text("username: admin\n")
            self.assertContains(self.client.get("/login/"), "<code data-first-login-file>var/first-login.txt</code>")

    def test_a_clone_says_what_it_is_a_clone_of_not_the_sources_description(self):
        Experiment.objects.filter(pk=self.experiment.pk).update(description="Demo: the tiny model repeats a letter")
        response = self.client_for(self.bob).post(f"/api/experiments/{self.experiment.pk}/clone/", {}, format="json")
        self.assertEqual(response.status_code, 201, response.content)
        self.assertEqual(response.json()["description"], f"A copy of 'Exp' (experiment {self.experiment.pk}).")
        self.client.force_login(self.bob)
        page = self.client.get(f"/experiments/new/?clone={self.experiment.pk}")
        self.assertEqual(page.context["meta"]["description"], f"A copy of 'Exp' (experiment {self.experiment.pk}).")
        self.assertEqual(page.context["meta"]["name"], "Exp (copy)")
        self.assertNotContains(page, "repeats a letter")
