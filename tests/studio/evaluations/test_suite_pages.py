"""The suite pages as a person uses them: the editor saves a suite from its task rows (errors shown beside what
was typed, nothing saved), the launch form picks checkpoints and base models, a viewer only reads."""

from __future__ import annotations

from unittest import mock

from studio.celery import app as celery_app
from studio.evaluations.models import Suite, SuiteRun
from studio.runs.models import Checkpoint
from tests.studio.base import StudioTestCase, model_folder


class SuitePagesTest(StudioTestCase):
    def form(self, **rows) -> dict:
        body = {"team": self.team.pk, "name": "core", "seed": "3", "engine": "transformers", "max_new_tokens": "8",
                "task-0-name": "qa", "task-0-dataset": self.dataset.pk, "task-0-rubric": self.rubric.pk,
                "task-0-samples_per_prompt": "4", "task-0-pass_threshold": "1",
                "task-1-name": "sums", "task-1-procedural": "arithmetic", "task-1-rubric": self.rubric.pk,
                "task-1-num_prompts": "5"}  # fmt: skip
        return {**body, **rows}

    def test_the_editor_saves_a_suite_from_its_rows(self):
        self.client.force_login(self.bob)
        answer = self.client.post("/suites/new/", self.form())
        suite = Suite.objects.get()
        self.assertRedirects(answer, f"/suites/{suite.pk}/")
        self.assertEqual([t["name"] for t in suite.tasks], ["qa", "sums"])
        self.assertEqual((suite.tasks[0]["pass_threshold"], suite.tasks[1]["procedural"]["task"]), (1.0, "arithmetic"))
        self.assertEqual((suite.seed, suite.rollout), (3, {"max_new_tokens": 8}))
        page = self.client.get(f"/suites/{suite.pk}/")
        self.assertContains(page, 'value="qa"')
        self.assertContains(page, "task-2-name")  # an empty row to add a task with

    def test_a_bad_row_is_shown_and_nothing_is_saved(self):
        self.client.force_login(self.bob)
        answer = self.client.post("/suites/new/", self.form(**{"task-0-samples_per_prompt": "0"}))
        self.assertContains(answer, "tasks.0.samples_per_prompt", status_code=400)
        self.assertContains(answer, 'value="sums"', status_code=400)  # what was typed stays
        answer = self.client.post("/suites/new/", self.form(**{"task-1-rubric": ""}))
        self.assertContains(answer, "tasks.1.rubric", status_code=400)
        self.assertFalse(Suite.objects.exists())

    def test_the_launch_form_starts_a_suite_run_and_a_viewer_cannot(self):
        suite = Suite.objects.create(team=self.team, name="core", tasks=[
            {"name": "qa", "dataset": self.dataset.pk, "rubric": self.rubric.pk}])  # fmt: skip
        trained = self.make_run(state="succeeded", name="grpo")
        step = Checkpoint.objects.create(
            run=trained, step=7, path=str(model_folder(self.data_dir / f"runs/{trained.pk}/step-7"))
        )
        base = str(model_folder(self.tmp / "models" / "tiny"))
        self.client.force_login(self.carol)
        self.assertEqual(self.client.get(f"/suites/{suite.pk}/launch/").status_code, 403)
        self.client.force_login(self.bob)
        # an older checkpoint whose folder the run deleted (checkpoint.keep_last) is not offered, and that is said
        gone = Checkpoint.objects.create(run=trained, step=3, path=str(self.data_dir / f"runs/{trained.pk}/step-3"))
        form = self.client.get(f"/suites/{suite.pk}/launch/")
        self.assertContains(form, f'value="{step.pk}"')
        self.assertNotContains(form, f'value="{gone.pk}"')
        self.assertContains(form, "1 older checkpoint not offered: its folder is gone")
        sent = mock.Mock(return_value=mock.Mock(id="task-1"))
        with mock.patch.object(celery_app, "send_task", sent), self.captureOnCommitCallbacks(execute=True):
            answer = self.client.post(f"/suites/{suite.pk}/launch/", {"checkpoints": [step.pk], "base_models": base})
        suite_run = SuiteRun.objects.get()
        self.assertRedirects(answer, f"/suite-runs/{suite_run.pk}/")
        self.assertEqual([r.model_label for r in suite_run.results.all()], [f"base: {base}", "grpo @ step 7"])
        refused = self.client.post(f"/suites/{suite.pk}/launch/", {"base_models": ""})
        self.assertContains(refused, "choose at least one checkpoint", status_code=400)

    def test_the_list_shows_the_teams_suites_and_an_outsider_gets_404(self):
        suite = Suite.objects.create(team=self.team, name="core", tasks=[{"name": "qa"}])
        SuiteRun.objects.create(suite=suite, team=self.team, name="core #1", spec={})
        self.client.force_login(self.carol)
        listed = self.client.get("/suites/")
        self.assertContains(listed, f'href="/suites/{suite.pk}/"')
        self.assertContains(listed, "core #1")
        self.assertNotContains(self.client.get(f"/suites/{suite.pk}/"), "Save suite")  # a viewer reads only
        self.client.force_login(self.charlie)
        self.assertNotContains(self.client.get("/suites/"), "core #1")
        self.assertEqual(self.client.get(f"/suites/{suite.pk}/").status_code, 404)
