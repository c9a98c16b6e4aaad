"""Rubric settings that cannot work are refused where they are typed, naming the field, and
nothing is saved: weights that are all 0 (the reward would be 0 forever), no criterion."""

from __future__ import annotations

from studio.rubrics.models import Rubric
from tests.studio.base import StudioTestCase

ZERO = {
    "criteria": [
        {"name": "correct", "kind": "exact_match", "weight": 0},
        {"name": "short", "kind": "length", "weight": 0},
    ]
}


class RubricChecksTest(StudioTestCase):
    def create(self, spec):
        body = {"team": self.team.pk, "name": "new", "spec": spec}
        return self.client_for(self.bob).post("/api/rubrics/", body, format="json")

    def test_the_api_refuses_a_rubric_whose_weights_are_all_zero(self):
        response = self.create(ZERO)
        self.assertEqual(response.status_code, 400)
        self.assertIn("every criterion's weight is 0", str(response.json()["spec"]["criteria"]))
        self.assertFalse(Rubric.objects.filter(name="new").exists())

    def test_the_api_refuses_a_rubric_without_criteria(self):
        response = self.create({"criteria": []})
        self.assertEqual(response.status_code, 400)
        self.assertIn("add at least one criterion", str(response.json()["spec"]["criteria"]))
        self.assertFalse(Rubric.objects.filter(name="new").exists())

    def test_the_editor_refuses_zero_weights_naming_the_criteria(self):
        self.client.force_login(self.bob)
        body = {"team": self.team.pk, "name": "new", "count": "1", "c0.name": "correct", "c0.kind": "length",
                "c0.shown_kind": "length", "c0.weight": "0", "c0.params.unit": "words", "c0.params.target_min": "0",
                "c0.params.target_max": "10", "c0.params.slope": "0.1", "combine": "weighted_sum", "action": "save"}  # fmt: skip
        response = self.client.post("/rubrics/new/", body)
        self.assertEqual(response.status_code, 200)
        errors = response.context["errors"]
        self.assertIn("every criterion's weight is 0", " ".join(v for k, v in errors.items() if k.endswith("criteria")))
        self.assertContains(response, "every criterion&#x27;s weight is 0")
        self.assertFalse(Rubric.objects.filter(name="new").exists())


NESTED = {"criteria": [{"name": "fmt", "kind": "regex", "params": {"pattern": r"(\w+\s?)*$"}}]}


class RegexWarningsTest(StudioTestCase):
    def test_the_api_saves_a_nested_quantifier_pattern_and_warns_about_it(self):
        response = self.client_for(self.bob).post(
            "/api/rubrics/", {"team": self.team.pk, "name": "nested", "spec": NESTED}, format="json"
        )
        self.assertEqual(response.status_code, 201, response.content)
        self.assertIn("nests quantifiers", response.json()["warnings"]["criteria.0.params.pattern"])
        self.assertTrue(Rubric.objects.filter(name="nested").exists())
        listed = self.client_for(self.carol).get(f"/api/rubrics/{response.json()['id']}/").json()
        self.assertEqual(list(listed["warnings"]), ["criteria.0.params.pattern"])
        self.assertEqual(self.client_for(self.carol).get(f"/api/rubrics/{self.rubric.pk}/").json()["warnings"], {})

    def test_the_editor_saves_it_and_shows_the_warning_once(self):
        self.client.force_login(self.bob)
        body = {"team": self.team.pk, "name": "nested", "count": "1", "c0.name": "fmt", "c0.kind": "regex",
                "c0.shown_kind": "regex", "c0.weight": "1", "c0.params.pattern": r"(\w+\s?)*$",
                "c0.params.mode": "search", "c0.params.timeout_s": "1", "combine": "weighted_sum", "action": "save"}  # fmt: skip
        response = self.client.post("/rubrics/new/", body, follow=True)
        rubric = Rubric.objects.get(name="nested")
        self.assertEqual(response.redirect_chain[-1][0], f"/rubrics/{rubric.pk}/")
        self.assertEqual(response.content.decode().count("nests quantifiers"), 1)
        self.assertIn("spec.criteria.0.params.pattern", response.content.decode())
