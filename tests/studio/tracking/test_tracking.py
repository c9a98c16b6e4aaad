"""Experiment trackers in the studio (studio.tracking): team secrets are write-only and encrypted,
mirror settings are checked (the schema, the tracker's server against STUDIO_TRACKER_ENDPOINTS, the
secret each names), experiments inherit the team's defaults until they set their own, and the run
page shows each tracker's mirror status."""

from __future__ import annotations

import json

from django.test import override_settings

from studio.runs.models import Run
from studio.tracking import services
from studio.tracking.models import MirrorStatus, TrackerSecret
from tests.studio.base import StudioTestCase

KEY = "wandb-secret-value-do-not-show-0123456789"


class TrackerSecretsTest(StudioTestCase):
    def url(self, suffix: str = "") -> str:
        return f"/api/teams/{self.team.pk}/tracker-secrets/{suffix}"

    def test_a_secret_is_stored_encrypted_and_never_given_back(self):
        self.client.force_login(self.alice)
        made = self.client.post(
            self.url(), {"name": "wb", "kind": "wandb", "value": KEY}, content_type="application/json"
        )
        self.assertEqual(made.status_code, 201, made.content)
        self.assertEqual(set(made.json()), {"name", "kind", "endpoint", "created", "updated", "created_by"})
        self.assertEqual(made.json()["endpoint"], "https://api.wandb.ai:443")  # a W&B key's default server
        row = TrackerSecret.objects.get(team=self.team, name="wb")
        self.assertNotIn(KEY.encode(), bytes(row.ciphertext))
        self.assertEqual(services.secret_value(self.team.pk, "wb"), KEY)
        for user in (self.alice, self.carol):  # owners and viewers alike: names and kinds only
            self.client.force_login(user)
            listed = self.client.get(self.url())
            self.assertEqual([s["name"] for s in listed.json()["results"]], ["wb"])
            self.assertNotIn(KEY, listed.content.decode())
            page = self.client.get(f"/teams/{self.team.pk}/trackers/")
            self.assertEqual(page.status_code, 200)
            self.assertContains(page, "wb")
            self.assertNotIn(KEY, page.content.decode())

    def test_replacing_a_secret_keeps_its_kind_and_a_bad_one_is_refused(self):
        self.client.force_login(self.alice)
        services.set_secret(self.team, "wb", "wandb", "old")
        again = self.client.post(
            self.url(), {"name": "wb", "kind": "wandb", "value": "new"}, content_type="application/json"
        )
        self.assertEqual(again.status_code, 201)
        self.assertEqual(services.secret_value(self.team.pk, "wb"), "new")
        other = self.client.post(
            self.url(), {"name": "wb", "kind": "mlflow", "value": "x"}, content_type="application/json"
        )
        self.assertEqual(other.status_code, 400)
        self.assertIn("is a wandb secret", other.json()["kind"][0])
        for body in ({"name": "../x", "kind": "wandb", "value": "x"}, {"name": "a", "kind": "neptune", "value": "x"},
                     {"name": "a", "kind": "wandb", "value": "  "}):  # fmt: skip
            answer = self.client.post(self.url(), body, content_type="application/json")
            self.assertEqual(answer.status_code, 400, body)

    def test_a_changed_secret_key_makes_stored_secrets_unreadable_with_a_clear_error(self):
        services.set_secret(self.team, "wb", "wandb", KEY)
        with override_settings(SECRET_KEY="another-key-entirely"), self.assertRaisesRegex(ValueError, "set it again"):
            services.secret_value(self.team.pk, "wb")


class MirrorSettingsTest(StudioTestCase):
    def put(self, url: str, body: dict):
        return self.client.put(url, json.dumps(body), content_type="application/json")

    def test_settings_are_checked_against_the_schema_the_endpoints_and_the_secrets(self):
        self.client.force_login(self.alice)
        url = f"/api/teams/{self.team.pk}/mirror-settings/"
        bad = self.put(url, {"wandb": {"enabled": True, "api_key_secret": "missing"},
                             "mlflow": {"enabled": True, "tracking_uri": "http://tracker.example.com:5000"},
                             "rollouts_per_step": 1000})  # fmt: skip
        self.assertEqual(bad.status_code, 400)
        self.assertEqual(set(bad.json()), {"rollouts_per_step"})  # the schema first
        bad = self.put(url, {"wandb": {"enabled": True, "api_key_secret": "missing"},
                             "mlflow": {"enabled": True, "tracking_uri": "http://tracker.example.com:5000"}})  # fmt: skip
        errors = bad.json()
        self.assertIn("no wandb secret named 'missing'", errors["wandb.api_key_secret"][0])
        self.assertIn("STUDIO_TRACKER_ENDPOINTS", errors["mlflow.tracking_uri"][0])
        services.set_secret(self.team, "wb", "wandb", KEY)
        good = self.put(url, {"wandb": {"enabled": True, "api_key_secret": "wb"},
                              "mlflow": {"enabled": True, "tracking_uri": "http://127.0.0.1:5000"}})  # fmt: skip
        self.assertEqual(good.status_code, 200, good.content)
        self.assertEqual(services.team_defaults(self.team).enabled(), ["wandb", "mlflow"])
        with override_settings(TRACKER_ENDPOINTS=["tracker.example.com"]):
            moved = self.put(url, {"mlflow": {"enabled": True, "tracking_uri": "http://tracker.example.com:5000"}})
        self.assertEqual(moved.status_code, 200, moved.content)

    def test_an_experiment_inherits_the_teams_defaults_until_it_sets_its_own(self):
        services.save_team_defaults(self.team, {"trackio": {"enabled": True}, "rollouts_per_step": 2})
        run = Run.objects.create(team=self.team, experiment=self.experiment, name="r", spec={}, created_by=self.alice)
        self.assertEqual(services.settings_for_run(run).enabled(), ["trackio"])
        self.client.force_login(self.bob)  # an editor
        url = f"/api/experiments/{self.experiment.pk}/mirror-settings/"
        own = self.put(url, {"inherit": False, "settings": {"wandb": {"enabled": True, "mode": "offline"}}})
        self.assertEqual(own.status_code, 200, own.content)
        self.assertEqual(services.settings_for_run(run).enabled(), ["wandb"])
        self.assertEqual(services.settings_for_run(run).rollouts_per_step, 8)  # its own, not the team's 2
        self.assertEqual(self.put(url, {"inherit": "yes"}).status_code, 400)
        back = self.put(url, {"inherit": True})
        self.assertEqual(back.json()["settings"]["rollouts_per_step"], 2)
        self.assertEqual(services.settings_for_run(run).enabled(), ["trackio"])

    def test_the_pages_save_settings_through_the_same_checks(self):
        self.client.force_login(self.bob)
        page = f"/experiments/{self.experiment.pk}/trackers/"
        self.assertContains(self.client.get(page), "wandb.api_key_secret")
        refused = self.client.post(page, {"inherit": "0", "wandb.enabled": "1", "wandb.mode": "online",
                                          "wandb.project": "p", "wandb.base_url": "https://api.wandb.ai",
                                          "rollouts_per_step": "8", "max_text_chars": "4000"})  # fmt: skip
        self.assertEqual(refused.status_code, 200)
        self.assertContains(refused, "required in online mode")
        saved = self.client.post(page, {"inherit": "0", "trackio.enabled": "1", "trackio.project": "mine",
                                        "rollouts_per_step": "5", "max_text_chars": "4000"})  # fmt: skip
        self.assertEqual(saved.status_code, 302)
        inherit, chosen = services.experiment_settings(self.experiment)
        self.assertEqual((inherit, chosen.enabled(), chosen.trackio.project, chosen.rollouts_per_step),
                         (False, ["trackio"], "mine", 5))  # fmt: skip
        self.client.force_login(self.carol)  # a viewer reads, changes nothing
        self.assertEqual(self.client.get(page).status_code, 200)
        self.assertEqual(self.client.post(page, {"inherit": "1"}).status_code, 403)
        self.client.force_login(self.bob)  # an editor cannot set the team's secrets
        answer = self.client.post(
            f"/teams/{self.team.pk}/trackers/", {"set_secret": "1", "name": "x", "kind": "wandb", "value": "v"}
        )
        self.assertEqual(answer.status_code, 403)

    def test_the_run_page_shows_each_trackers_status(self):
        run = Run.objects.create(team=self.team, experiment=self.experiment, name="r", spec={}, created_by=self.alice)
        MirrorStatus.objects.create(run=run, tracker="mlflow", state="failing", failures=3, dropped=4,
                                    last_error="could not start: ConnectionError: refused")  # fmt: skip
        MirrorStatus.objects.create(run=run, tracker="wandb", state="ok", steps_sent=5, rollouts_sent=40)
        self.client.force_login(self.carol)
        page = self.client.get(f"/runs/{run.pk}/")
        self.assertContains(page, 'data-mirror="mlflow" data-state="failing"')
        self.assertContains(page, "could not start: ConnectionError: refused")
        self.assertContains(page, "wandb: ok · 5 steps, 40 rollouts")
        mirrors = self.client.get(f"/api/runs/{run.pk}/mirrors/").json()["results"]
        self.assertEqual(
            [(m["tracker"], m["state"], m["dropped"]) for m in mirrors], [("mlflow", "failing", 4), ("wandb", "ok", 0)]
        )


class SecretBindingTest(StudioTestCase):
    """A secret is bound to the server it was set for; moving a mirror is an owner's action that clears it."""

    OLD, NEW = "http://127.0.0.1:5000", "http://localhost:6000"

    def put(self, url: str, body: dict):
        return self.client.put(url, json.dumps(body), content_type="application/json")

    def mlflow(self, uri: str, secret: str = "tok") -> dict:
        auth = "token" if secret else "none"
        return {"inherit": False, "settings": {"mlflow": {"enabled": True, "tracking_uri": uri, "auth": auth,
                                                          "secret": secret}}}  # fmt: skip

    def test_a_secret_names_its_server_which_must_be_a_trackers_endpoint(self):
        self.client.force_login(self.alice)
        url = f"/api/teams/{self.team.pk}/tracker-secrets/"
        missing = self.client.post(url, {"name": "tok", "kind": "mlflow", "value": "v"}, format="json")
        self.assertEqual(missing.status_code, 400)
        self.assertIn("the server this secret may be sent to", missing.json()["endpoint"][0])
        far = self.client.post(url, {"name": "tok", "kind": "mlflow", "value": "v",
                                     "endpoint": "http://tracker.example.com"}, format="json")  # fmt: skip
        self.assertIn("STUDIO_TRACKER_ENDPOINTS", far.json()["endpoint"][0])
        made = self.client.post(url, {"name": "tok", "kind": "mlflow", "value": "v",
                                      "endpoint": "HTTP://127.0.0.1:5000/"}, format="json")  # fmt: skip
        self.assertEqual(made.status_code, 201, made.content)
        self.assertEqual(made.json()["endpoint"], "http://127.0.0.1:5000")
        self.assertFalse(TrackerSecret.objects.filter(team=self.team, endpoint="").exists())

    def test_settings_naming_a_secret_set_for_another_server_are_refused(self):
        services.set_secret(self.team, "tok", "mlflow", "v", endpoint=self.OLD)
        self.client.force_login(self.alice)
        url = f"/api/teams/{self.team.pk}/mirror-settings/"
        other = {"enabled": True, "tracking_uri": self.OLD + "0"}  # the same host, another port
        self.assertEqual(self.put(url, {"mlflow": other}).status_code, 200)
        refused = self.put(url, {"mlflow": {**other, "auth": "token", "secret": "tok"}})
        self.assertEqual(refused.status_code, 400)
        self.assertIn(f"was set for {self.OLD} and is sent there only", refused.json()["mlflow.secret"][0])
        self.assertEqual(services.team_defaults(self.team).mlflow.secret, "")  # nothing saved
        moved = self.put(url, {"mlflow": {"enabled": True, "tracking_uri": self.OLD, "auth": "token", "secret": "tok"}})
        self.assertEqual(moved.status_code, 200, moved.content)
        self.assertEqual(moved.json()["cleared"], {})  # moved to the secret's own server: it stays
        self.assertEqual(services.team_defaults(self.team).mlflow.secret, "tok")

    def test_an_editor_cannot_move_a_mirror_and_an_owners_move_clears_its_secret(self):
        services.set_secret(self.team, "tok", "mlflow", "v", endpoint=self.OLD)
        services.save_experiment_settings(self.experiment, False, self.mlflow(self.OLD)["settings"])
        url = f"/api/experiments/{self.experiment.pk}/mirror-settings/"
        self.client.force_login(self.bob)  # an editor
        moved = self.put(url, self.mlflow(self.NEW))
        self.assertEqual(moved.status_code, 403)
        self.assertIn("mlflow.tracking_uri) is an owner's action", moved.json()["detail"])
        unsecret = self.put(url, self.mlflow(self.NEW, secret=""))  # without the secret: a move all the same
        self.assertEqual(unsecret.status_code, 403)
        switched_off = self.mlflow(self.NEW)
        switched_off["settings"]["mlflow"]["enabled"] = False  # a tracker switched off moves too (on again later)
        self.assertEqual(self.put(url, switched_off).status_code, 403)
        self.assertEqual(services.experiment_settings(self.experiment)[1].mlflow.tracking_uri, self.OLD)
        kept = self.put(url, {**self.mlflow(self.OLD), "settings": {**self.mlflow(self.OLD)["settings"],
                                                                    "rollouts_per_step": 3}})  # fmt: skip
        self.assertEqual(kept.status_code, 200, kept.content)  # the same server: editors change the rest
        page = self.client.post(f"/experiments/{self.experiment.pk}/trackers/", {
            "inherit": "0", "mlflow.enabled": "1", "mlflow.tracking_uri": self.NEW, "mlflow.experiment": "e",
            "mlflow.auth": "token", "mlflow.secret": "tok", "rollouts_per_step": "8", "max_text_chars": "4000"})  # fmt: skip
        self.assertEqual(page.status_code, 403)
        self.assertContains(page, "is an owner&#x27;s action", status_code=403)
        self.assertEqual(self.put(url, {"inherit": True}).status_code, 200)  # back to the owners' servers: open

        self.client.force_login(self.alice)  # the owner
        self.put(url, self.mlflow(self.OLD))
        done = self.put(url, self.mlflow(self.NEW))
        self.assertEqual(done.status_code, 200, done.content)
        self.assertEqual(set(done.json()["cleared"]), {"mlflow.secret"})
        saved = services.experiment_settings(self.experiment)[1].mlflow
        self.assertEqual((saved.tracking_uri, saved.secret, saved.auth), (self.NEW, "", "none"))
        services.set_secret(self.team, "new-tok", "mlflow", "v2", endpoint=self.NEW)  # its own secret: kept
        again = self.put(url, self.mlflow(self.NEW, secret="new-tok"))
        self.assertEqual((again.status_code, again.json()["cleared"]), (200, {}))

    def test_an_owners_move_of_an_online_wandb_switches_it_off_until_a_key_for_the_new_server_is_set(self):
        services.set_secret(self.team, "wb", "wandb", KEY)  # bound to W&B's own server
        self.client.force_login(self.alice)
        url = f"/api/teams/{self.team.pk}/mirror-settings/"
        self.assertEqual(self.put(url, {"wandb": {"enabled": True, "api_key_secret": "wb"}}).status_code, 200)
        moved = self.put(url, {"wandb": {"enabled": True, "api_key_secret": "wb", "base_url": "http://127.0.0.1:8080"}})
        self.assertEqual(moved.status_code, 200, moved.content)
        self.assertIn("switch wandb on again", moved.json()["cleared"]["wandb.api_key_secret"])
        wandb = services.team_defaults(self.team).wandb
        self.assertEqual((wandb.enabled, wandb.api_key_secret, wandb.base_url), (False, "", "http://127.0.0.1:8080"))
