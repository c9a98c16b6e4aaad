"""Rubrics: saving, and the judge models they may load."""

from __future__ import annotations

from tests.studio.base import StudioTestCase

JUDGE = {"name": "judge", "kind": "llm_judge", "params": {"backend": "local", "rubric": "Is it right?"}}


class RubricsTest(StudioTestCase):
    def test_a_local_judge_model_cannot_be_another_teams_run_output(self):
        foreign = self.data_dir / "runs" / "999" / "checkpoints" / "step-3"
        spec = {"criteria": [{**JUDGE, "params": {**JUDGE["params"], "model": str(foreign)}}]}
        body = {"team": self.team.pk, "name": "judged", "spec": spec}
        response = self.client_for(self.bob).post("/api/rubrics/", body, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn("inside the studio's data folder", response.json()["spec.criteria.0.params.model"][0])
        spec["criteria"][0]["params"]["model"] = "/models/judge"  # a server admin's folder: fine
        self.assertEqual(self.client_for(self.bob).post("/api/rubrics/", body, format="json").status_code, 201)
