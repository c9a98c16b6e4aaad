"""The rubric editor: criteria forms from each kind's schema, saving, and "try it" by role."""

from __future__ import annotations

from unittest import mock

from studio.rubrics.models import Rubric
from tests.studio.base import StudioTestCase


class RubricPagesTest(StudioTestCase):
    def test_the_rubric_editor_adds_a_criterion_with_its_kinds_parameters_and_saves(self):
        self.client.force_login(self.bob)
        body = {"team": self.team.pk, "name": "R", "count": "1", "c0.name": "correct", "c0.kind": "exact_match",
                "c0.shown_kind": "exact_match", "c0.weight": "1", "combine": "weighted_sum", "action": "add", "new_kind": "regex"}  # fmt: skip
        page = self.client.post("/rubrics/new/", body)
        self.assertContains(page, 'name="c1.params.pattern"')
        body.update({"count": "2", "c1.name": "has_digit", "c1.kind": "regex", "c1.shown_kind": "regex", "c1.weight": "0.5",
                     "c1.params.pattern": r"\d", "c1.params.mode": "search", "action": "save"})  # fmt: skip
        response = self.client.post("/rubrics/new/", body)
        rubric = Rubric.objects.get(name="R")
        self.assertRedirects(response, f"/rubrics/{rubric.pk}/", fetch_redirect_response=False)
        self.assertEqual([c["kind"] for c in rubric.criteria], ["exact_match", "regex"])
        self.assertEqual(rubric.criteria[1]["params"]["pattern"], r"\d")

    def test_a_rubric_with_a_missing_parameter_is_refused_naming_it(self):
        self.client.force_login(self.bob)
        body = {"team": self.team.pk, "name": "R", "count": "1", "c0.name": "r", "c0.kind": "regex", "c0.shown_kind": "regex",
                "c0.weight": "1", "c0.params.pattern": "", "action": "save"}  # fmt: skip
        response = self.client.post("/rubrics/new/", body)
        self.assertEqual(response.status_code, 200)
        self.assertIn("pattern", " ".join(response.context["errors"]))
        self.assertFalse(Rubric.objects.filter(name="R").exists())

    def rubric_try(self, **criterion):
        """The rubric page's POST for "Score": one criterion (the saved one unless changed) and one completion."""
        body = {"team": self.team.pk, "name": "Correct", "count": "1", "c0.name": "correct", "c0.kind": "exact_match",
                "c0.shown_kind": "exact_match", "c0.weight": "1", "c0.params.reference_field": "answer",
                "c0.params.extract": "full", "c0.params.marker": "Answer:", "c0.params.strip_whitespace": "on",
                "combine": "weighted_sum", "action": "try", "try_prompt": "2+2?", "try_answer": "4",
                "try_completions": "4"}  # fmt: skip
        return {**body, **criterion}

    def test_a_viewer_on_the_rubric_page_scores_the_saved_rubric(self):
        self.client.force_login(self.carol)
        with mock.patch("studio.rubrics.pages.try_rubric", return_value={"results": []}) as scored:
            response = self.client.post(f"/rubrics/{self.rubric.pk}/", self.rubric_try())
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response.context["errors"], {})
        self.assertEqual(scored.call_args.args[0], self.rubric.spec)

    def test_a_viewer_on_the_rubric_page_cannot_score_changed_criteria(self):
        self.client.force_login(self.carol)
        code = {"c0.kind": "python", "c0.shown_kind": "python", "c0.params.code": "def score(**kw):\n    return 1"}
        with mock.patch("studio.rubrics.pages.try_rubric", return_value={"results": []}) as scored:
            response = self.client.post(f"/rubrics/{self.rubric.pk}/", self.rubric_try(**code))
        self.assertIn("owner or editor role", response.context["errors"]["spec"])
        scored.assert_not_called()

    def test_someone_who_edits_no_team_cannot_score_a_new_rubric(self):
        self.client.force_login(self.charlie)  # owns his own team, not alice's: the rubric would be alice's team's
        with mock.patch("studio.rubrics.pages.try_rubric", return_value={"results": []}) as scored:
            response = self.client.post("/rubrics/new/", self.rubric_try())
        self.assertIn("owner or editor role", response.context["errors"]["spec"])
        scored.assert_not_called()
        self.client.force_login(self.bob)
        with mock.patch("studio.rubrics.pages.try_rubric", return_value={"results": []}) as scored:
            self.client.post("/rubrics/new/", self.rubric_try())
        scored.assert_called_once()

    def test_a_bad_pattern_met_by_try_it_is_shown_once_at_its_criterion(self):
        self.client.force_login(self.bob)
        body = {"team": self.team.pk, "name": "R", "count": "1", "c0.name": "r", "c0.kind": "regex", "c0.shown_kind": "regex",
                "c0.weight": "1", "c0.params.pattern": "(", "c0.params.mode": "search", "action": "try",
                "try_prompt": "p", "try_completions": "x"}  # fmt: skip
        page = self.client.post("/rubrics/new/", body).content.decode()
        self.assertEqual(page.count("invalid regular expression"), 1)
        # beside the field it is about (the criterion's parameter), not in the page's error list
        field = page[page.index('data-field="c0.params.pattern"') : page.index('data-field="c0.params.mode"')]
        self.assertIn('<small class="error">invalid regular expression', field)

    def test_a_try_it_error_is_shown_once_beside_the_score_button(self):
        self.client.force_login(self.bob)
        page = self.client.post("/rubrics/new/", self.rubric_try(try_completions="")).content.decode()
        self.assertEqual(page.count("type at least one completion"), 1)
        self.assertIn('<p class="error" data-try-error>type at least one completion', page)
