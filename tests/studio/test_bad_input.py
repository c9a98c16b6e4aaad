"""Malformed input, class by class, through the API and the pages: each answers a 4xx naming the
field (never a 500), and the next, well-formed request still works.

- integers past 64 bits as a team, member, filter or rollout id, and as ?limit= (the database
  cannot hold them: OverflowError / IntegrityError before);
- a JSON field sent as `null` in a form body (parsed after DRF's null check: NOT NULL IntegrityError);
- an experiment config, launch or clone overrides that are not an object, or whose sections are not
  (AttributeError / TypeError in the settings code);
- a page form's malformed fields and buttons (the rubric editor's remove-<i>, its criteria count)."""

from __future__ import annotations

from rest_framework.test import APIClient

from studio.datasets.models import Dataset
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from studio.runs.models import Checkpoint
from studio.sharing.models import Note
from tests.studio.base import RUBRIC, StudioTestCase

HUGE = 2**64  # one past what a signed (and an unsigned) 64-bit column holds
HUGER = 10**30


class BadInputTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.api = self.client_for(self.bob)  # an editor

    def assert_refused(self, response, field: str, status: int = 400) -> dict:
        self.assertEqual(response.status_code, status, response.content[:500])
        body = response.json()
        self.assertIn(field, body, body)
        return body

    def assert_still_works(self) -> None:
        response = self.api.get("/api/experiments/", {"team": self.team.pk})
        self.assertEqual(response.status_code, 200, response.content[:300])
        self.assertEqual([e["id"] for e in response.json()["results"]], [self.experiment.pk])


class HugeIntegersTest(BadInputTest):
    def test_a_team_id_past_64_bits_in_a_json_or_form_body_is_refused_naming_team(self):
        for huge in (HUGE, HUGER, -HUGE):
            with self.subTest(team=huge):
                body = {"team": huge, "name": "r", "spec": RUBRIC}
                self.assert_refused(self.api.post("/api/rubrics/", body, format="json"), "team")
                form = {"team": str(huge), "name": "qa", "path": "/nowhere.jsonl"}
                self.assert_refused(self.api.post("/api/datasets/", form, format="multipart"), "team")
                self.assert_still_works()
        self.assertEqual(Rubric.objects.count(), 1)

    def test_a_team_or_experiment_filter_past_64_bits_is_refused_naming_the_parameter(self):
        for path, param in (("/api/datasets/", "team"), ("/api/runs/", "team"), ("/api/runs/", "experiment")):
            with self.subTest(path=path, param=param):
                self.assert_refused(self.api.get(path, {param: str(HUGE)}), param)
                self.assert_refused(self.api.get(path, {param: "²"}), param)  # a digit to isdigit(), not to int()
        self.assert_still_works()

    def test_a_member_id_past_64_bits_is_not_found(self):
        response = self.client_for(self.alice).delete(f"/api/teams/{self.team.pk}/members/{HUGE}/")
        self.assertEqual(response.status_code, 404, response.content)
        response = self.client_for(self.alice).delete(f"/api/teams/{self.team.pk}/members/{self.carol.pk}/")
        self.assertEqual(response.status_code, 204, response.content)

    def test_paging_limits_past_64_bits_are_refused_and_large_ones_capped(self):
        self.assert_refused(self.api.get("/api/rubrics/", {"limit": str(HUGE)}), "limit")
        self.assert_refused(self.api.get("/api/rubrics/", {"limit": "many"}), "limit")
        self.assert_refused(self.api.get("/api/rubrics/", {"offset": "-1"}), "offset")
        for n in range(3):
            Rubric.objects.create(team=self.team, name=f"r{n}", spec=RUBRIC)
        page = self.api.get("/api/rubrics/", {"limit": "1000000"}).json()
        self.assertEqual((page["count"], len(page["results"])), (4, 4))
        self.assertIn("limit=1000&", page["next"] or "limit=1000&")  # capped at 1000 if there were more
        page = self.api.get("/api/rubrics/", {"limit": "2"}).json()
        self.assertEqual(len(page["results"]), 2)
        self.assertIn("limit=2", page["next"])

    def test_run_events_and_notes_refuse_numbers_past_64_bits_naming_them(self):
        run = self.make_run()
        self.assert_refused(self.api.get(f"/api/runs/{run.pk}/events/", {"after": str(HUGE)}), "after")
        self.assertEqual(self.api.get(f"/api/runs/{run.pk}/events/", {"limit": str(HUGER)}).status_code, 400)
        self.assertEqual(self.api.get(f"/api/runs/{run.pk}/events/", {"limit": "5000"}).status_code, 200)
        notes = f"/api/runs/{run.pk}/notes/"
        self.assert_refused(self.api.get(notes, {"rollout": str(HUGE)}), "rollout")
        self.assert_refused(self.api.post(notes, {"text": "odd", "rollout": HUGE}, format="json"), "rollout")
        self.assertEqual(Note.objects.count(), 0)
        self.assertEqual(self.api.post(notes, {"text": "odd"}, format="json").status_code, 201)
        self.assertEqual(len(self.api.get(notes).json()["results"]), 1)

    def test_experiment_ids_past_64_bits_name_their_field(self):
        base = {"team": self.team.pk, "name": "e", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/models/tiny"}  # fmt: skip
        for field in ("dataset", "rubric", "environment"):
            with self.subTest(field=field):
                self.assert_refused(self.api.post("/api/experiments/", {**base, field: HUGE}, format="json"), field)
        self.assert_refused(self.api.post("/api/experiments/", {**base, "rubric": 1e300}, format="json"), "rubric")
        launch = f"/api/experiments/{self.experiment.pk}/launch/"
        self.assert_refused(self.api.post(launch, {"kind": "eval", "checkpoint": HUGE}, format="json"), "checkpoint")
        self.assert_still_works()

    def test_a_checkpoint_id_past_64_bits_in_an_environment_try_names_checkpoint(self):
        from tests.studio.environment_kind import CONFIG

        environment = self.client_for(self.bob).post(
            "/api/environments/", {"team": self.team.pk, "name": "env", "config": CONFIG}, format="json"
        )
        self.assertEqual(environment.status_code, 201, environment.content)
        body = {"rows": [{"prompt": "hi"}], "checkpoint": HUGE}
        self.assert_refused(self.api.post(f"/api/environments/{environment.json()['id']}/try/", body, format="json"),
                            "checkpoint")  # fmt: skip
        self.assertEqual(Checkpoint.objects.count(), 0)


class NullInFormBodiesTest(BadInputTest):
    def test_null_for_a_json_field_in_a_form_body_is_refused_naming_the_field(self):
        path = self.tmp / "more.jsonl"
        path.write_text('{"prompt": "p", "answer": "a"}\n')
        form = {"team": self.team.pk, "name": "more", "path": str(path), "extra_fields": "null"}
        self.assert_refused(self.api.post("/api/datasets/", form, format="multipart"), "extra_fields")
        form["extra_fields"] = '{"a": 1}'  # JSON, but not a list of column names
        self.assert_refused(self.api.post("/api/datasets/", form, format="multipart"), "extra_fields")
        for field, body, path in (
            ("config", {"team": self.team.pk, "name": "e", "rubric": self.rubric.pk, "dataset": self.dataset.pk,
                        "model_path": "/models/tiny", "config": "null"}, "/api/experiments/"),
            ("spec", {"team": self.team.pk, "name": "r", "spec": "null"}, "/api/rubrics/"),
            ("config", {"team": self.team.pk, "name": "env", "config": "null"}, "/api/environments/"),
        ):  # fmt: skip
            with self.subTest(path=path):
                self.assert_refused(self.api.post(path, body, format="multipart"), field)
        self.assertEqual(Dataset.objects.count(), 1)
        form["extra_fields"] = '["answer"]'
        created = self.api.post("/api/datasets/", form, format="multipart")
        self.assertEqual(created.status_code, 201, created.content)
        self.assertEqual(created.json()["extra_fields"], ["answer"])


class ConfigShapeTest(BadInputTest):
    def post_experiment(self, config):
        body = {"team": self.team.pk, "name": "e", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/models/tiny", "preset": "grpo", "config": config}  # fmt: skip
        return self.api.post("/api/experiments/", body, format="json")

    def test_a_config_that_is_not_an_object_is_refused_naming_config(self):
        for config in ([1, 2], "grpo", 7, True):
            with self.subTest(config=config):
                self.assert_refused(self.post_experiment(config), "config")
        self.assertEqual(Experiment.objects.count(), 1)
        self.assert_still_works()

    def test_a_section_that_is_not_an_object_is_refused_naming_it(self):
        for section in ("model", "data", "algorithm", "optim", "checkpoint"):
            for value in ([], "x", 3):
                with self.subTest(section=section, value=value):
                    errors = self.assert_refused(self.post_experiment({section: value}), "config")["config"]
                    self.assertIn(section, errors)
        self.assertEqual(self.post_experiment({"environment": None, "optim": {"total_steps": 3}}).status_code, 201)

    def test_patching_a_saved_experiment_with_a_bad_section_keeps_it_as_it_was(self):
        url = f"/api/experiments/{self.experiment.pk}/"
        errors = self.assert_refused(self.api.patch(url, {"config": {"model": "tiny"}}, format="json"), "config")
        self.assertIn("model", errors["config"])
        self.experiment.refresh_from_db()
        self.assertEqual(self.experiment.config, {"optim": {"total_steps": 5}})
        self.assertEqual(self.api.patch(url, {"config": {"optim": {"total_steps": 4}}}, format="json").status_code, 200)

    def test_overrides_and_clone_settings_with_a_section_that_is_not_an_object_name_it(self):
        run = self.make_run(state="failed")
        launch = f"/api/experiments/{self.experiment.pk}/launch/"
        for path, field, body in (
            (f"/api/runs/{run.pk}/clone/", "overrides", {"overrides": {"checkpoint": 5}}),
            (launch, "overrides", {"overrides": {"data": [1]}}),
            (f"/api/experiments/{self.experiment.pk}/clone/", "config", {"config": {"model": "tiny"}}),
        ):
            with self.subTest(path=path):
                errors = self.assert_refused(self.api.post(path, body, format="json"), field)[field]
                self.assertEqual(len(errors), 1, errors)
        clone = self.api.post(f"/api/experiments/{self.experiment.pk}/clone/", {"name": "copy"}, format="json")
        self.assertEqual(clone.status_code, 201, clone.content)


class PageFormTest(StudioTestCase):
    def edit(self, **post):
        self.client.force_login(self.bob)
        fields = {"name": "Correct", "team": self.team.pk, "count": "1", "c0.name": "correct",
                  "c0.kind": "exact_match", "c0.weight": "1", "combine": "weighted_sum", **post}  # fmt: skip
        return self.client.post(f"/rubrics/{self.rubric.pk}/", fields)

    def test_a_malformed_action_on_the_rubric_page_is_a_400_naming_it_and_the_page_still_works(self):
        for action in ("remove-x", "remove-99", "remove-", "remove--1", "remove-²", "explode"):
            with self.subTest(action=action):
                response = self.edit(action=action)
                self.assertEqual(response.status_code, 400)
                self.assertContains(response, "<b>action</b>: ", status_code=400)
        response = self.edit(action="remove-0")
        self.assertEqual(response.status_code, 200)
        self.assertNotContains(response, 'name="c0.name"')
        self.assertEqual(self.edit(action="save", **{"c0.weight": "2"}).status_code, 302)
        self.rubric.refresh_from_db()
        self.assertEqual(self.rubric.spec["criteria"][0]["weight"], 2.0)

    def test_a_malformed_criteria_count_or_team_is_shown_not_a_500(self):
        for count in ("many", "²", str(10**9), "-1"):
            with self.subTest(count=count):
                response = self.edit(action="refresh", count=count)
                self.assertContains(response, "<b>count</b>: must be the number of criteria")
        self.client.force_login(self.bob)
        response = self.client.post("/rubrics/new/", {"name": "x", "team": "²", "count": "0", "action": "try",
                                                      "try_completions": "4", "try_fields": "[1]"})  # fmt: skip
        self.assertEqual(response.status_code, 200)
        self.assertEqual(self.client.get(f"/rubrics/{self.rubric.pk}/").status_code, 200)

    def test_the_api_answers_the_next_request_after_a_malformed_one(self):
        api = APIClient()
        api.force_authenticate(self.bob)
        self.assertEqual(api.get("/api/rubrics/", {"team": str(HUGE)}).status_code, 400)
        self.assertEqual(api.get("/api/rubrics/", {"team": self.team.pk}).status_code, 200)
