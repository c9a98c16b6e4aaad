"""Suites through the API: saving one (its tasks checked against the team's objects and the trainer's schema),
launching it on checkpoints and base models (one evaluation run per pair, one job for the suite run), who may
do what, and the result table with its changes against the base model and the best model per task."""

from __future__ import annotations

from unittest import mock

from studio.celery import app as celery_app
from studio.evaluations import table
from studio.evaluations.models import Suite, SuiteResult, SuiteRun
from studio.runs.models import Checkpoint, Run
from tests.studio.base import StudioTestCase, model_folder


class SuitesApiTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.base_model = str(model_folder(self.tmp / "models" / "tiny"))
        self.trained = self.make_run(state="succeeded", name="grpo")
        self.checkpoints = [
            Checkpoint.objects.create(
                run=self.trained, step=s, path=str(model_folder(self.data_dir / f"runs/{self.trained.pk}/step-{s}"))
            )
            for s in (10, 20)
        ]

    def tasks(self, **extra) -> list[dict]:
        return [{"name": "qa", "dataset": self.dataset.pk, "rubric": self.rubric.pk, "samples_per_prompt": 2, **extra},
                {"name": "sums", "procedural": {"task": "arithmetic"}, "rubric": self.rubric.pk, "num_prompts": 3,
                 "pass_threshold": 1.0}]  # fmt: skip

    def make_suite(self, user=None, **body):
        body = {"team": self.team.pk, "name": "core", "tasks": self.tasks(), **body}
        return self.client_for(user or self.bob).post("/api/suites/", body, format="json")

    def test_an_editor_saves_a_suite_and_a_viewer_or_outsider_cannot(self):
        made = self.make_suite()
        self.assertEqual(made.status_code, 201, made.data)
        self.assertEqual([t["name"] for t in made.data["tasks"]], ["qa", "sums"])
        self.assertEqual(self.make_suite(self.carol).status_code, 403)
        self.assertEqual(self.make_suite(self.charlie).status_code, 404)
        suite = made.data["id"]
        self.assertEqual(self.client_for(self.carol).get(f"/api/suites/{suite}/").status_code, 200)
        self.assertEqual(self.client_for(self.charlie).get(f"/api/suites/{suite}/").status_code, 404)

    def test_bad_tasks_are_refused_naming_the_field(self):
        other = self.make_dataset(name="theirs.jsonl", team=self.other_team)
        cases = {
            "tasks.0.dataset": self.tasks(dataset=other.pk),  # another team's
            "tasks.0.samples_per_prompt": self.tasks(samples_per_prompt=0),
            "tasks.0.name": self.tasks(name="no spaces please"),
            "tasks.0.colour": self.tasks(colour="red"),
        }
        for field, tasks in cases.items():
            answer = self.make_suite(tasks=tasks)
            self.assertEqual(answer.status_code, 400, field)
            self.assertIn(field, answer.data, answer.data)
        self.assertIn("tasks", self.make_suite(tasks=[]).data)
        self.assertEqual(Suite.objects.count(), 0)

    def launch(self, user=None, **body):
        suite = Suite.objects.get(pk=self.make_suite().data["id"])
        sent = mock.Mock(return_value=mock.Mock(id="task-1"))
        with mock.patch.object(celery_app, "send_task", sent), self.captureOnCommitCallbacks(execute=True):
            answer = self.client_for(user or self.bob).post(f"/api/suites/{suite.pk}/launch/", body, format="json")
        return answer, sent

    def test_a_launch_makes_one_evaluation_run_per_pair_and_one_job(self):
        answer, sent = self.launch(base_models=[self.base_model], checkpoints=[c.pk for c in self.checkpoints])
        self.assertEqual(answer.status_code, 201, answer.data)
        suite_run = SuiteRun.objects.get(pk=answer.data["id"])
        self.assertEqual(answer.data["state"], "queued")
        sent.assert_called_once_with("workers.run_suite", args=[suite_run.pk], queue="gpu")
        results = list(suite_run.results.select_related("run"))
        self.assertEqual([(r.model_label, r.task) for r in results], [
            (f"base: {self.base_model}", "qa"), (f"base: {self.base_model}", "sums"),
            ("grpo @ step 10", "qa"), ("grpo @ step 10", "sums"), ("grpo @ step 20", "qa"), ("grpo @ step 20", "sums"),
        ])  # fmt: skip
        pair = results[3].run  # step 10 on the generated sums: the checkpoint on its run's model settings
        self.assertEqual((pair.kind, pair.state, pair.team_id), ("eval", "queued", self.team.pk))
        self.assertEqual(pair.spec["eval"]["checkpoint"], self.checkpoints[0].path)
        self.assertEqual(pair.spec["model"]["path"], self.trained.spec["model"]["path"])
        self.assertEqual(pair.spec["data"]["procedural"]["task"], "arithmetic")
        self.assertEqual((pair.spec["eval"]["num_prompts"], pair.spec["rubric"]["pass_threshold"]), (3, 1.0))
        self.assertEqual(results[0].run.spec["eval"]["samples_per_prompt"], 2)
        self.assertEqual({r.run.spec["optim"]["seed"] for r in results}, {0})  # one seed for every pair
        self.assertEqual(Run.objects.filter(kind="eval").count(), 6)

    def test_a_launch_that_names_nothing_it_may_use_is_refused(self):
        theirs = Run.objects.create(team=self.other_team, name="theirs", spec={"model": {"path": "x"}})
        their_checkpoint = Checkpoint.objects.create(run=theirs, step=1, path=str(self.tmp / "their-step-1"))
        for body, field in (({}, "checkpoints"), ({"checkpoints": [their_checkpoint.pk]}, "checkpoints.0"),
                            ({"base_models": [str(self.data_dir / "secret")]}, "base_models.0"),
                            ({"base_models": [str(self.tmp / "no-such-model")]}, "models.0.model.path")):  # fmt: skip
            answer, sent = self.launch(**body)
            self.assertEqual(answer.status_code, 400, body)
            self.assertIn(field, answer.data)
            sent.assert_not_called()
        self.assertEqual(SuiteRun.objects.count(), 0)
        answer, _ = self.launch(self.carol, base_models=[self.base_model])
        self.assertEqual(answer.status_code, 403)

    def test_the_table_marks_the_best_model_and_the_change_against_the_base(self):
        answer, _ = self.launch(base_models=[self.base_model], checkpoints=[c.pk for c in self.checkpoints])
        suite_run = SuiteRun.objects.get(pk=answer.data["id"])
        scores = {
            ("qa", 0): 0.25,
            ("qa", 1): 0.5,
            ("qa", 2): 0.75,
            ("sums", 0): 0.5,
            ("sums", 1): 0.25,
            ("sums", 2): 0.0,
        }
        for r in suite_run.results.all():
            value = scores[(r.task, r.model_index)]
            SuiteResult.objects.filter(pk=r.pk).update(
                num_prompts=2, reward_mean=value, reward_mean_low=0.0, reward_mean_high=1.0, pass_at_1=value,
                pass_at_1_low=value - 0.1, pass_at_1_high=value + 0.1, pass_at_k=1.0, pass_at_k_low=1.0,
                pass_at_k_high=1.0,
            )  # fmt: skip
        got = table.result_table(suite_run)
        self.assertEqual(got["base"], f"base: {self.base_model}")
        qa = [row["cells"][0] for row in got["rows"]]
        self.assertEqual([c["best"] for c in qa], [False, False, True])
        self.assertEqual([c["pass_at_1"]["delta"] for c in qa], [None, 0.25, 0.5])
        self.assertEqual(qa[2]["pass_at_1"]["delta_text"], "+0.500")
        sums = [row["cells"][1] for row in got["rows"]]
        self.assertEqual([c["best"] for c in sums], [True, False, False])  # the base model is best here
        self.assertEqual(qa[1]["inspector"], f"/runs/{qa[1]['run']}/#rollouts")
        detail = self.client_for(self.carol).get(f"/api/suite-runs/{suite_run.pk}/")
        self.assertEqual(detail.status_code, 200)
        self.assertEqual(detail.data["table"]["rows"][2]["cells"][0]["pass_at_1"]["value"], 0.75)
        self.assertEqual(self.client_for(self.charlie).get(f"/api/suite-runs/{suite_run.pk}/").status_code, 404)
        self.client.force_login(self.carol)
        page = self.client.get(f"/suite-runs/{suite_run.pk}/")
        self.assertContains(page, "data-suite-table")
        self.assertContains(page, f'href="/runs/{qa[2]["run"]}/#rollouts"')

    def test_cancelling_a_suite_run_cancels_its_queued_pairs(self):
        answer, _ = self.launch(base_models=[self.base_model])
        suite_run = answer.data["id"]
        self.assertEqual(self.client_for(self.carol).post(f"/api/suite-runs/{suite_run}/cancel/").status_code, 403)
        cancelled = self.client_for(self.bob).post(f"/api/suite-runs/{suite_run}/cancel/")
        self.assertEqual((cancelled.status_code, cancelled.data["state"]), (200, "cancelled"))
        self.assertEqual(set(Run.objects.filter(kind="eval").values_list("state", flat=True)), {"cancelled"})

    def test_a_pair_run_on_its_own_shows_the_scores_its_run_reported(self):
        # A broker restart loses the suite's job; the studio sends each queued run again by itself (requeue_waiting),
        # and a pair's evaluation run reports the suite's eval/ metrics: the table reads them from there.
        from studio.runs.models import MetricPoint

        answer, _ = self.launch(base_models=[self.base_model])
        suite_run = SuiteRun.objects.get(pk=answer.data["id"])
        pair = suite_run.results.get(task="qa")
        Run.objects.filter(pk=pair.run_id).update(state="succeeded")
        values = {"eval/reward_mean": 0.5, "eval/reward_mean_low": 0.25, "eval/reward_mean_high": 0.75,
                  "eval/pass@1": 0.5, "eval/pass@1_low": 0.0, "eval/pass@1_high": 1.0, "eval/pass@2": 1.0,
                  "eval/pass@2_low": 1.0, "eval/pass@2_high": 1.0, "eval/reward/mean": 0.5}  # fmt: skip
        MetricPoint.objects.bulk_create(MetricPoint(run_id=pair.run_id, step=0, key=k, value=v, wall_time=0)
                                        for k, v in values.items())  # fmt: skip
        cell = table.result_table(suite_run)["rows"][0]["cells"][0]
        self.assertEqual(cell["pass_at_1"]["value"], 0.5)
        self.assertEqual((cell["pass_at_k"]["value"], cell["reward_mean"]["low"]), (1.0, 0.25))
        self.assertIsNone(table.result_table(suite_run)["rows"][0]["cells"][1]["pass_at_1"])  # still queued
