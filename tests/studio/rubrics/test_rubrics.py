"""Rubrics: saving, deleting one that experiments use, and the judge models they may load."""

from __future__ import annotations

from studio.rubrics.models import Rubric
from tests.studio.base import RUBRIC, StudioTestCase

JUDGE = {"name": "judge", "kind": "llm_judge", "params": {"backend": "local", "rubric": "Is it right?"}}


class RubricsTest(StudioTestCase):
    def test_deleting_a_rubric_that_experiments_use_is_a_conflict_naming_them(self):
        response = self.client_for(self.bob).delete(f"/api/rubrics/{self.rubric.pk}/")
        self.assertEqual(response.status_code, 409)
        self.assertIn(f'experiment "Exp" (id {self.experiment.pk})', response.json()["detail"])
        self.assertTrue(Rubric.objects.filter(pk=self.rubric.pk).exists())
        unused = Rubric.objects.create(team=self.team, name="Unused", spec=RUBRIC)
        self.assertEqual(self.client_for(self.bob).delete(f"/api/rubrics/{unused.pk}/").status_code, 204)

    def test_a_local_judge_model_cannot_be_another_teams_run_output(self):
        foreign = self.data_dir / "runs" / "999" / "checkpoints" / "step-3"
        spec = {"criteria": [{**JUDGE, "params": {**JUDGE["params"], "model": str(foreign)}}]}
        body = {"team": self.team.pk, "name": "judged", "spec": spec}
        response = self.client_for(self.bob).post("/api/rubrics/", body, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn("inside the studio's data folder", response.json()["spec.criteria.0.params.model"][0])
        spec["criteria"][0]["params"]["model"] = "/models/judge"  # a server admin's folder: fine
        self.assertEqual(self.client_for(self.bob).post("/api/rubrics/", body, format="json").status_code, 201)
