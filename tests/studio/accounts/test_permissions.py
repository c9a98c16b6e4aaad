"""Each role and an outsider against each kind of object and action (see base.py for who may do what)."""

from __future__ import annotations

from unittest import mock

from studio.runs.models import Run
from tests.studio.base import RUBRIC, StudioTestCase

READ = {"alice": 200, "bob": 200, "carol": 200, "charlie": 404}
WRITE_OK = {"alice": 200, "bob": 200, "carol": 403, "charlie": 404}


class PermissionsTest(StudioTestCase):
    def people(self):
        return {"alice": self.alice, "bob": self.bob, "carol": self.carol, "charlie": self.charlie}

    def urls(self) -> dict[str, str]:
        run = self.make_run()
        return {
            "dataset": f"/api/datasets/{self.dataset.pk}/",
            "rubric": f"/api/rubrics/{self.rubric.pk}/",
            "experiment": f"/api/experiments/{self.experiment.pk}/",
            "run": f"/api/runs/{run.pk}/",
            "run events": f"/api/runs/{run.pk}/events/",
            "run rollouts": f"/api/runs/{run.pk}/rollouts/",
            "dataset preview": f"/api/datasets/{self.dataset.pk}/preview/",
            "team": f"/api/teams/{self.team.pk}/",
        }

    def test_members_read_every_kind_of_object_and_outsiders_get_404(self):
        for what, url in self.urls().items():
            for name, user in self.people().items():
                with self.subTest(what=what, who=name):
                    self.assertEqual(self.client_for(user).get(url).status_code, READ[name])

    def test_lists_show_outsiders_nothing_of_the_team(self):
        self.make_run()
        for kind in ("datasets", "rubrics", "experiments", "runs", "teams"):
            with self.subTest(kind=kind):
                ids = [row["id"] for row in self.client_for(self.charlie).get(f"/api/{kind}/").json()["results"]]
                team_ids = [self.other_team.pk] if kind == "teams" else []
                self.assertEqual(ids, team_ids)
                self.assertTrue(self.client_for(self.carol).get(f"/api/{kind}/").json()["results"])

    def test_only_owners_and_editors_edit_datasets_rubrics_and_experiments(self):
        targets = {
            "dataset": (f"/api/datasets/{self.dataset.pk}/", {"name": "renamed"}),
            "rubric": (f"/api/rubrics/{self.rubric.pk}/", {"name": "renamed"}),
            "experiment": (f"/api/experiments/{self.experiment.pk}/", {"name": "renamed"}),
        }
        for what, (url, body) in targets.items():
            for name, user in self.people().items():
                with self.subTest(what=what, who=name):
                    self.assertEqual(self.client_for(user).patch(url, body, format="json").status_code, WRITE_OK[name])

    def test_only_owners_and_editors_create_in_a_team(self):
        expected = {"alice": 201, "bob": 201, "carol": 403, "charlie": 404}  # charlie: outside the team, 404
        for name, user in self.people().items():
            with self.subTest(who=name):
                body = {"team": self.team.pk, "name": f"r-{name}", "spec": RUBRIC}
                response = self.client_for(user).post("/api/rubrics/", body, format="json")
                self.assertEqual(response.status_code, expected[name], response.content)

    def test_only_owners_and_editors_delete(self):
        expected = {"carol": 403, "charlie": 404, "bob": 204}
        for name, code in expected.items():
            with self.subTest(who=name):
                url = f"/api/experiments/{self.experiment.pk}/"
                self.assertEqual(self.client_for(self.people()[name]).delete(url).status_code, code)

    def test_only_owners_and_editors_launch_runs(self):
        expected = {"carol": 403, "charlie": 404, "alice": 201, "bob": 201}
        for name, code in expected.items():
            with self.subTest(who=name):
                response = self.client_for(self.people()[name]).post(f"/api/experiments/{self.experiment.pk}/launch/")
                self.assertEqual(response.status_code, code, response.content)
        self.assertEqual(Run.objects.filter(experiment=self.experiment).count(), 2)

    def test_only_owners_and_editors_cancel_resume_and_clone_runs(self):
        for action in ("cancel", "resume", "clone"):
            for name, code in {"carol": 403, "charlie": 404}.items():
                with self.subTest(action=action, who=name):
                    run = self.make_run()
                    response = self.client_for(self.people()[name]).post(f"/api/runs/{run.pk}/{action}/")
                    self.assertEqual(response.status_code, code)
        run = self.make_run()
        self.assertEqual(self.client_for(self.bob).post(f"/api/runs/{run.pk}/cancel/").status_code, 200)

    def test_only_owners_manage_members(self):
        expected = {"alice": 201, "bob": 403, "carol": 403, "charlie": 404}
        for name, code in expected.items():
            with self.subTest(who=name):
                body = {"username": "bob", "role": "editor"}  # no change: charlie must stay an outsider
                response = self.client_for(self.people()[name]).post(f"/api/teams/{self.team.pk}/members/", body)
                self.assertEqual(response.status_code, code)

    def test_a_viewer_may_still_try_the_saved_rubric_but_not_edit_it(self):
        url = f"/api/rubrics/{self.rubric.pk}/try/"
        pairs = [{"prompt": "2+2?", "completion": "4", "answer": "4"}]
        with mock.patch("studio.rubrics.api.try_rubric", return_value={"results": []}) as scored:
            response = self.client_for(self.carol).post(url, {"pairs": pairs}, format="json")
        self.assertEqual(response.status_code, 200, response.content)
        self.assertEqual(scored.call_args.args, (self.rubric.spec, pairs))
        self.assertEqual(self.client_for(self.carol).patch(f"/api/rubrics/{self.rubric.pk}/", {"name": "x"}).status_code,
                         403)  # fmt: skip
        self.assertEqual(self.client_for(self.charlie).post(url, {"pairs": pairs}, format="json").status_code, 404)

    def test_a_viewer_cannot_score_an_unsaved_rubric_because_its_code_would_run_on_a_worker(self):
        python = {"criteria": [{"name": "pwn", "kind": "python", "params": {"code": "def score(**kw):\n    return 1"}}]}
        body = {"pairs": [{"prompt": "p", "completion": "c"}], "spec": python}
        with mock.patch("studio.rubrics.api.try_rubric", return_value={"results": []}) as scored:
            response = self.client_for(self.carol).post(f"/api/rubrics/{self.rubric.pk}/try/", body, format="json")
        self.assertEqual(response.status_code, 403)
        self.assertIn("owner or editor role", response.json()["spec"])
        scored.assert_not_called()

    def test_an_editor_may_score_an_unsaved_rubric(self):
        spec = {"criteria": [{"name": "has_four", "kind": "contains", "params": {"keywords": ["4"]}}]}
        body = {"pairs": [{"prompt": "p", "completion": "4"}], "spec": spec}
        with mock.patch("studio.rubrics.api.try_rubric", return_value={"results": []}) as scored:
            response = self.client_for(self.bob).post(f"/api/rubrics/{self.rubric.pk}/try/", body, format="json")
        self.assertEqual(response.status_code, 200, response.content)
        self.assertEqual(scored.call_args.args[0], spec)

    def test_anonymous_requests_are_refused(self):
        for url in self.urls().values():
            with self.subTest(url=url):
                self.assertIn(self.client.get(url).status_code, (401, 403))
