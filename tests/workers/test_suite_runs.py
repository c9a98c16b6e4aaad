"""A suite run end to end in-process: a trained tiny model's checkpoint and its base model on two tasks, through
execute_suite with the real trainer and the real database (the broker's part is tests/workers/test_suite_worker.py)."""

from __future__ import annotations

from unittest import mock

import pytest

from studio.celery import app as celery_app
from studio.evaluations import services
from studio.evaluations.models import Suite
from studio.rubrics.models import Rubric
from studio.runs import lifecycle
from studio.runs.models import Checkpoint, MetricPoint, Rollout, Run
from tests.studio.base import StudioTestCase
from workers.suites import execute_suite
from workers.tasks import execute_run

ANY = {"criteria": [{"name": "any", "kind": "regex", "params": {"pattern": r"[\s\S]*"}}]}
HAS_A = {"criteria": [{"name": "a", "kind": "regex", "params": {"pattern": "a"}}]}


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from trainers.demos.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


class SuiteRunTest(StudioTestCase):
    @pytest.fixture(autouse=True)
    def _model(self, tiny_model):
        self.model_path = str(tiny_model)

    def trained_checkpoint(self) -> Checkpoint:
        from trainers.demos.demo import demo_spec, make_demo_dataset

        data = make_demo_dataset(self.tmp / "demo.jsonl")
        spec = demo_spec(self.model_path, data, self.tmp / "out", optim={"total_steps": 1, "prompts_per_step": 2},
                         algorithm={"group_size": 2})  # fmt: skip
        run = lifecycle.create_run(self.team, spec, name="demo")
        self.assertEqual(execute_run(run.pk, "test-worker"), "succeeded")
        return Checkpoint.objects.get(run=run)

    def suite(self) -> Suite:
        letters = self.make_dataset(
            [{"prompt": f"Repeat the letter: {c}", "answer": c} for c in "abc"], "letters.jsonl"
        )
        rubrics = [Rubric.objects.create(team=self.team, name=n, spec=s) for n, s in (("any", ANY), ("has-a", HAS_A))]
        tasks = [{"name": "anything", "dataset": letters.pk, "rubric": rubrics[0].pk, "samples_per_prompt": 2},
                 {"name": "has-a", "dataset": letters.pk, "rubric": rubrics[1].pk, "samples_per_prompt": 4,
                  "num_prompts": 2}]  # fmt: skip
        return Suite.objects.create(team=self.team, name="letters", tasks=tasks, rollout={"max_new_tokens": 4})

    def test_every_pair_is_scored_and_its_samples_are_its_runs_rollouts(self):
        checkpoint = self.trained_checkpoint()
        sent = mock.Mock(return_value=mock.Mock(id="task-1"))
        with mock.patch.object(celery_app, "send_task", sent), self.captureOnCommitCallbacks(execute=True):
            suite_run = services.launch(self.suite(), self.bob, checkpoint_ids=[checkpoint.pk],
                                        base_models=[self.model_path])  # fmt: skip
        self.assertEqual(execute_suite(suite_run.pk, "test-worker"), "done")
        self.assertEqual(suite_run.state, "succeeded")
        results = list(suite_run.results.select_related("run"))
        self.assertEqual([(r.model_index, r.task) for r in results], [(0, "anything"), (0, "has-a"), (1, "anything"),
                                                                       (1, "has-a")])  # fmt: skip
        for r in results:
            n, k = (3, 2) if r.task == "anything" else (2, 4)
            self.assertEqual((r.run.state, r.run.worker, r.num_prompts, r.k), ("succeeded", "test-worker", n, k))
            rollouts = Rollout.objects.filter(run=r.run)
            self.assertEqual(rollouts.count(), n * k)
            passes = [
                sum(x.reward >= 1 for x in rollouts.filter(prompt_id=p))
                for p in sorted({x.prompt_id for x in rollouts})
            ]
            self.assertAlmostEqual(r.pass_at_1, sum(c / k for c in passes) / n)
            self.assertLessEqual(r.pass_at_1_low, r.pass_at_1)
            mean = MetricPoint.objects.get(run=r.run, key="eval/reward_mean")
            self.assertAlmostEqual(mean.value, r.reward_mean)
            states = [e.payload["state"] for e in r.run.events.filter(kind="status").order_by("seq")]
            self.assertEqual(states, ["queued", "running", "succeeded"])
        self.assertEqual((results[0].pass_at_1, results[0].pass_at_1_low, results[0].pass_at_1_high), (1.0, 1.0, 1.0))
        self.assertEqual(results[2].run.spec["eval"]["checkpoint"], checkpoint.path)
        # Each pair recorded its provenance as a run does: its data digested and snapshotted in its own folder, so
        # "Run again exactly" repeats it on those bytes.
        for r in results:
            run = Run.objects.get(pk=r.run_id)
            (data,) = [i for i in run.provenance["inputs"] if i["field"] == "data.path"]
            self.assertEqual(data["path"], run.spec["data"]["path"])
            self.assertTrue(data["snapshot"].startswith(str(self.data_dir / "runs" / str(run.pk))), data)
            self.assertEqual(run.action_refusals()["rerun"], "")
        first = Run.objects.get(pk=results[0].run_id)
        again, _ = lifecycle.rerun_exactly(first, self.bob)
        (pinned,) = [i["snapshot"] for i in first.provenance["inputs"] if i["field"] == "data.path"]
        self.assertEqual((again.kind, again.spec["data"]["path"], again.repeat_of_id), ("eval", pinned, first.pk))
        # Again (a job sent twice): nothing is left queued, so nothing is done twice.
        self.assertEqual(execute_suite(suite_run.pk, "test-worker"), "done")
        self.assertEqual(Rollout.objects.filter(run=results[0].run).count(), 6)

    def test_a_cancelled_pair_is_not_run_and_the_rest_are(self):
        sent = mock.Mock(return_value=mock.Mock(id="task-1"))
        with mock.patch.object(celery_app, "send_task", sent), self.captureOnCommitCallbacks(execute=True):
            suite_run = services.launch(self.suite(), self.bob, base_models=[self.model_path])
        first = suite_run.results.get(task="anything").run
        lifecycle.request_cancel(first)
        execute_suite(suite_run.pk, "test-worker")
        self.assertEqual(Run.objects.get(pk=first.pk).state, "cancelled")
        other = suite_run.results.get(task="has-a")
        self.assertEqual(other.run.state, "succeeded")
        self.assertIsNotNone(other.pass_at_1)
        self.assertEqual(suite_run.state, "cancelled")
