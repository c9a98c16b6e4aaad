"""Environments as a team's studio object: saved through the API with their config validated by
trainers.spec.EnvironmentSpec, versioned on every config change, pinned by experiments.

alice owns the team, bob edits, carol views (tests/studio/people.py); the full role matrix of
each endpoint is in tests/studio/accounts/test_permission_matrix.py."""

from __future__ import annotations

from studio.environments.models import Environment
from tests.studio.base import StudioTestCase
from tests.studio.environment_kind import CONFIG, KIND


class EnvironmentsTest(StudioTestCase):
    def create(self, user=None, **body):
        payload = {"team": self.team.pk, "name": "countdown", "config": CONFIG, **body}
        return self.client_for(user or self.bob).post("/api/environments/", payload, format="json")

    def test_an_editor_saves_an_environment_as_version_1_with_the_schemas_defaults(self):
        response = self.create()
        self.assertEqual(response.status_code, 201, response.content)
        saved = response.json()
        self.assertEqual(saved["version"], 1)
        self.assertEqual(saved["config"]["kind"], KIND)
        self.assertEqual(saved["config"]["max_episode_tokens"], 1024)  # EnvironmentSpec's default, filled in
        versions = self.client_for(self.carol).get(f"/api/environments/{saved['id']}/versions/").json()
        self.assertEqual([(v["number"], v["config"]) for v in versions], [(1, saved["config"])])

    def test_a_new_config_is_a_new_version_and_the_old_one_is_kept(self):
        pk = self.create().json()["id"]
        client = self.client_for(self.bob)
        renamed = client.patch(f"/api/environments/{pk}/", {"name": "renamed"}, format="json").json()
        self.assertEqual(renamed["version"], 1)  # a name is not a config
        changed = client.patch(f"/api/environments/{pk}/", {"config": {**CONFIG, "max_turns": 5}}, format="json")
        self.assertEqual(changed.json()["version"], 2)
        same = client.patch(f"/api/environments/{pk}/", {"config": {**CONFIG, "max_turns": 5}}, format="json")
        self.assertEqual(same.json()["version"], 2)  # saving the same config again is no new version
        versions = client.get(f"/api/environments/{pk}/versions/").json()
        self.assertEqual([(v["number"], v["config"]["max_turns"]) for v in versions], [(2, 5), (1, 3)])
        self.assertEqual(Environment.objects.get(pk=pk).config_of(1)["max_turns"], 3)

    def test_a_bad_config_is_refused_with_each_error_under_its_field_and_nothing_is_saved(self):
        bad_limit = self.create(config={**CONFIG, "max_turns": 0}).json()
        self.assertIn("max_turns", bad_limit["config"])
        bad_param = self.create(config={**CONFIG, "params": {"start": 99}}).json()
        self.assertIn("params.start", bad_param["config"])
        unknown = self.create(config={"kind": "no_such_kind"}).json()
        self.assertIn(KIND, str(unknown["config"]["kind"]))  # the message lists the kinds there are
        self.assertFalse(Environment.objects.exists())

    def test_a_viewer_cannot_save_and_an_outsider_cannot_see(self):
        self.assertEqual(self.create(self.carol).status_code, 403)
        pk = self.create().json()["id"]
        self.assertEqual(self.client_for(self.charlie).get(f"/api/environments/{pk}/").status_code, 404)
        self.assertEqual(self.client_for(self.charlie).get("/api/environments/").json()["count"], 0)

    def test_the_kinds_endpoint_gives_each_kinds_params_schema(self):
        kinds = self.client_for(self.carol).get("/api/environment-kinds/").json()
        self.assertEqual(kinds[KIND]["params"]["properties"]["start"]["maximum"], 10)


class ToolsSystemPromptTest(StudioTestCase):
    """The editor's starting system prompt for the tools chosen (trainers.rollout.environments.system_prompt)."""

    URL = "/api/environment-kinds/tools/system-prompt/"

    def test_it_names_the_tools_and_the_answer_format(self):
        response = self.client_for(self.carol).post(self.URL, {"tools": [{"kind": "calculator"}]}, format="json")
        self.assertEqual(response.status_code, 200, response.content)
        body = response.json()
        self.assertIn("Use the calculator for arithmetic, then answer with the number only.", body["system_prompt"])
        self.assertEqual(body["default"], "You are a helpful assistant.")

    def test_a_bad_answer_tag_is_refused_naming_the_field(self):
        response = self.client_for(self.carol).post(
            self.URL, {"tools": [{"kind": "calculator"}], "answer": "answer_tag", "answer_tag": "<b>"}, format="json"
        )
        self.assertEqual(response.status_code, 400)
        self.assertIn("answer_tag", response.json())
