"""execute_run end to end in-process: a real tiny model, the real trainer, the real database."""

from __future__ import annotations

import shutil
import time
from unittest import mock

import pytest

from studio.runs import lifecycle
from studio.runs.models import Checkpoint, MetricPoint, Rollout, Run
from tests.studio.base import StudioTestCase
from workers.tasks import execute_run


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from trainers.demos.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.usefixtures("tiny_model")
class ExecuteRunTest(StudioTestCase):
    @pytest.fixture(autouse=True)
    def _model(self, tiny_model):
        self.model_path = str(tiny_model)

    def demo_run(self, **overrides) -> Run:
        from trainers.demos.demo import demo_spec, make_demo_dataset

        data = make_demo_dataset(self.tmp / "demo.jsonl")
        optim = {"total_steps": 2, "prompts_per_step": 2, **overrides.pop("optim", {})}
        spec = demo_spec(self.model_path, data, self.tmp / "out", optim=optim, algorithm={"group_size": 2},
                         **overrides)  # fmt: skip
        return lifecycle.create_run(self.team, spec, name="demo")

    def test_a_training_run_records_metrics_rollouts_a_checkpoint_and_succeeds(self):
        run = self.demo_run()
        self.assertEqual(execute_run(run.pk, "test-worker"), "succeeded")
        run.refresh_from_db()
        self.assertEqual((run.state, run.last_step, run.worker), ("succeeded", 2, "test-worker"))
        self.assertEqual(
            sorted(set(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("step", flat=True))), [1, 2]
        )
        self.assertEqual(Rollout.objects.filter(run=run).count(), 2 * 2 * 2)
        self.assertTrue(Checkpoint.objects.filter(run=run).exists())
        states = [e.payload["state"] for e in run.events.filter(kind="status").order_by("seq")]
        self.assertEqual(states, ["queued", "running", "succeeded"])
        self.assertEqual(list(run.events.values_list("seq", flat=True)), list(range(1, run.last_seq + 1)))

    def test_a_run_that_fails_records_the_error_and_the_last_log_lines(self):
        run = self.demo_run(model={"path": str(self.tmp / "no-such-model")})
        self.assertEqual(execute_run(run.pk, "test-worker"), "failed")
        run.refresh_from_db()
        self.assertEqual(run.state, "failed")
        self.assertIn("no-such-model", run.error)
        self.assertIn("last log lines", run.error)
        lines = [e.payload["line"] for e in run.events.filter(kind="log")]
        tracebacks = [line for line in lines if line.startswith("Traceback (most recent call last)")]
        self.assertEqual(len(tracebacks), 1)  # the trainer's, not logged again by the task

    def test_a_checkpoint_write_that_fails_ends_the_run_failed_saying_the_disk_is_full(self):
        # torch's distributed checkpoint raises CheckpointException, a BaseException, when a write fails (a
        # full disk: bench/fault_disk_full.py fills a real one); it left the run "running" until swept as lost.
        # The trainer stands in for a real full disk here: the failure is raised where it would be.
        from torch.distributed.checkpoint.api import CheckpointException

        run = self.demo_run()
        failure = CheckpointException("write", {0: (RuntimeError("unexpected pos 704 vs 598"), None)})
        full = shutil._ntuple_diskusage(total=2**27, used=2**27, free=0)
        with (
            mock.patch("trainers.run.loop.train", side_effect=failure),
            mock.patch("shutil.disk_usage", return_value=full),
        ):
            self.assertEqual(execute_run(run.pk, "test-worker"), "failed")
        run.refresh_from_db()
        self.assertEqual(run.state, "failed")
        self.assertIn("CheckpointException", run.error)
        self.assertIn("the disk that holds the run's folder is full: 0.0 MiB free", run.error)

    def test_a_hub_model_that_cannot_be_downloaded_ends_the_run_with_one_line_and_the_traceback_in_the_log(self):
        # No network here (and where there is one, the Hub has no such model): either way, one look at the
        # Hub, no minute of retries, and one line saying what to do.
        run = self.demo_run(model={"path": "studio-tests/no-such-model"})
        started = time.monotonic()
        self.assertEqual(execute_run(run.pk, "test-worker"), "failed")
        self.assertLess(time.monotonic() - started, 30)
        run.refresh_from_db()
        self.assertEqual(run.error.splitlines(), [run.error])
        self.assertTrue(run.error.startswith("could not download studio-tests/no-such-model from the Hugging Face Hub: "),
                        run.error)  # fmt: skip
        self.assertIn("Put the model in a folder the studio can read and give its path", run.error)
        self.assertNotIn("Traceback", run.error)
        lines = [e.payload["line"] for e in run.events.filter(kind="log")]
        tracebacks = [line for line in lines if line.startswith("Traceback (most recent call last)")]
        self.assertEqual(len(tracebacks), 1)
        self.assertIn("ModelDownloadError", tracebacks[0])

    def test_a_cancel_request_stops_the_trainer_and_the_run_ends_cancelled(self):
        run = self.demo_run()
        Run.objects.filter(pk=run.pk).update(cancel_requested=True)
        self.assertEqual(execute_run(run.pk, "test-worker"), "cancelled")
        run.refresh_from_db()
        self.assertEqual(run.state, "cancelled")
        self.assertLess(run.last_step, 2)

    def test_a_run_cancelled_while_queued_is_not_started(self):
        run = self.demo_run()
        lifecycle.request_cancel(run)
        self.assertEqual(execute_run(run.pk, "test-worker"), "not-queued")
        self.assertEqual(Run.objects.get(pk=run.pk).state, "cancelled")

    def test_an_evaluation_run_scores_the_base_model_without_training(self):
        run = self.demo_run()
        Run.objects.filter(pk=run.pk).update(kind="eval")
        self.assertEqual(execute_run(run.pk, "test-worker"), "succeeded")
        keys = set(MetricPoint.objects.filter(run=run).values_list("key", flat=True))
        self.assertTrue(any(k.startswith("eval/") for k in keys), keys)
        self.assertTrue(Rollout.objects.filter(run=run).exists())
        # Filed as evaluation samples, never as training ones (issue 40).
        self.assertEqual(set(Rollout.objects.filter(run=run).values_list("split", "trained")), {("eval", False)})

    def test_a_resumed_run_continues_from_the_last_checkpoint_on_the_worker(self):
        first = self.demo_run()
        self.assertEqual(execute_run(first.pk, "test-worker"), "succeeded")
        # As if the user had asked for 3 steps and stopped it after 2: resume trains step 3 only.
        spec = dict(first.spec, optim={**first.spec["optim"], "total_steps": 3})
        Run.objects.filter(pk=first.pk).update(spec=spec)
        first.refresh_from_db()
        resumed = lifecycle.resume(first, self.alice)
        self.assertEqual(
            resumed.spec["checkpoint"]["resume_from"], Checkpoint.objects.filter(run=first).latest("step").path
        )
        self.assertEqual(execute_run(resumed.pk, "test-worker"), "succeeded")
        steps = sorted(set(MetricPoint.objects.filter(run=resumed, key="reward/mean").values_list("step", flat=True)))
        self.assertEqual(steps, [3])
        self.assertTrue(resumed.events.filter(kind="log", payload__line__startswith="resumed from").exists())

    def test_evaluating_a_checkpoint_scores_it_on_the_worker(self):
        trained = self.demo_run()
        self.assertEqual(execute_run(trained.pk, "test-worker"), "succeeded")
        trained.refresh_from_db()
        evaluation = lifecycle.evaluate_checkpoint(trained, self.alice)
        self.assertEqual(evaluation.kind, "eval")
        self.assertEqual(execute_run(evaluation.pk, "test-worker"), "succeeded")
        self.assertTrue(MetricPoint.objects.filter(run=evaluation, key__startswith="eval/").exists())
        self.assertTrue(Rollout.objects.filter(run=evaluation).exists())

    def test_a_run_whose_criterion_fails_everywhere_warns_then_stops_failed_naming_it(self):
        from trainers.demos.demo import demo_rubric

        broken = {"name": "broken", "kind": "exact_match", "params": {"reference_field": "missing"}}
        run = self.demo_run(rubric={"criteria": [*demo_rubric()["criteria"], broken]},
                            reward={"stop_after_failing_steps": 2}, optim={"total_steps": 5})  # fmt: skip
        self.assertEqual(execute_run(run.pk, "test-worker"), "failed")
        run.refresh_from_db()
        self.assertEqual((run.state, run.last_step), ("failed", 2))
        self.assertTrue(run.error.startswith("criterion 'broken' failed on more than 50% of the rollouts for 2 steps"))
        self.assertIn("the row has no field 'missing'", run.error)
        # A warning when the streak began; once the run ended, one for the whole run (studio.runs.scoring).
        first, warning = run.events.filter(kind="warning").order_by("seq")
        self.assertEqual((first.step, warning.step), (1, None))
        self.assertTrue(first.payload["message"].startswith("criterion 'broken' failed on 100% of step 1's rollouts"))
        total = Rollout.objects.filter(run=run).count()
        self.assertTrue(warning.payload["message"].startswith(
            f"scoring failed: criterion 'broken' failed on {total:,} of the run's {total:,} rollouts (100%)"
        ), warning.payload["message"])  # fmt: skip
        self.assertIn("the row has no field 'missing'", warning.payload["message"])
        self.assertEqual(run.warning, warning.payload["message"])
        self.assertEqual(run.scoring_failed, [{"criterion": "broken", "failed": total, "rollouts": total}])
        rates = MetricPoint.objects.filter(run=run, key="reward/criterion_failure_rate/broken")
        self.assertEqual(sorted(rates.values_list("step", "value")), [(1, 1.0), (2, 1.0)])
        self.assertEqual(self.client_for(self.carol).get(f"/api/runs/{run.pk}/").json()["warning"], run.warning)

        # The run page shows it as a banner; the runs list says it beside a run that is still going.
        self.client.force_login(self.carol)
        page = self.client.get(f"/runs/{run.pk}/").content.decode()
        self.assertIn('<p>⚠ <span data-run-warning-text>scoring failed: criterion &#x27;broken&#x27;', page)
        self.assertIn(f"scoring failed · broken {total}/{total}</span>", page)
        Run.objects.filter(pk=run.pk).update(state="running", error="")
        listed = self.client.get("/runs/")
        self.assertContains(listed, "⚠ scoring failed: criterion &#x27;broken&#x27; failed on")
        self.assertContains(listed, f"scoring failed · broken {total}/{total}</span>")
