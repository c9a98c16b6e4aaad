"""A run whose worker stops sending heartbeats is marked failed with the reason (and, while its
automatic restarts last, queued again: tests/studio/runs/test_restarts.py; these runs have none).
A worker that only hung (SIGSTOP) and goes on afterwards writes nothing more into the run; on
PostgreSQL, one that hung inside a transaction holding the run's row is swept all the same."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from studio.lib.database import postgres_options
from studio.runs import lifecycle
from studio.runs.models import Checkpoint, MetricPoint, Rollout, Run, RunEvent
from tests.studio.base import StudioTestCase
from trainers.report import Rollout as ReportedRollout
from workers import gpu
from workers.reporting import DatabaseReporter


def report_step(reporter: DatabaseReporter, step: int) -> None:
    """A step as the trainer reports it (metrics, then its rollouts, which flush), and a checkpoint."""
    reporter.metrics(step, {"reward/mean": 0.5})
    rollout = ReportedRollout(step=step, prompt_id="p", sample_index=0, prompt="Say a", completion="a", reward=1.0)
    reporter.rollouts(step, [rollout])
    reporter.checkpoint(step, f"/tmp/runs/x/checkpoints/step-{step}")
    reporter.flush()


def stored(run: Run) -> tuple[int, int, int, int, int]:
    """(metric points, rollouts, checkpoints, events, last_step) of the run."""
    run.refresh_from_db()
    return (MetricPoint.objects.filter(run=run).count(), Rollout.objects.filter(run=run).count(),
            Checkpoint.objects.filter(run=run).count(), RunEvent.objects.filter(run=run).count(), run.last_step)  # fmt: skip


class LostWorkerTest(StudioTestCase):
    def make_run(self, state: str = "queued", **fields) -> Run:
        run = super().make_run(state, **fields)
        run.spec["checkpoint"] = {**run.spec.get("checkpoint", {}), "max_restarts": 0}
        run.save(update_fields=["spec"])
        return run

    def test_the_sweeper_fails_runs_whose_heartbeat_is_older_than_the_timeout(self):
        stale = self.make_run("running", heartbeat=timezone.now() - timedelta(seconds=120), worker="gpu@box")
        fresh = self.make_run("running", heartbeat=timezone.now())
        self.assertEqual(lifecycle.sweep_lost_runs(timeout_s=45), [stale.pk])
        stale.refresh_from_db()
        self.assertEqual(stale.state, "failed")
        self.assertIn("worker lost", stale.error)
        self.assertIn("gpu@box", stale.error)
        self.assertEqual(stale.events.get(kind="status").payload["state"], "failed")
        self.assertEqual(Run.objects.get(pk=fresh.pk).state, "running")

    def test_a_live_workers_heartbeat_sweeps_so_a_lost_run_never_looks_alive(self):
        stale = self.make_run("running", heartbeat=timezone.now() - timedelta(hours=1))
        gpu.beat("other@box", ["gpu"], 1)
        self.assertEqual(Run.objects.get(pk=stale.pk).state, "failed")

    def test_reading_runs_writes_nothing(self):
        # Pages and API reads used to sweep; a GET must not change the database.
        stale = self.make_run("running", heartbeat=timezone.now() - timedelta(hours=1))
        for path in ("/api/runs/", "/runs/", "/"):
            with self.subTest(path=path):
                if path.startswith("/api/"):
                    self.assertEqual(self.client_for(self.carol).get(path).status_code, 200)
                else:
                    self.client.force_login(self.carol)
                    self.assertEqual(self.client.get(path).status_code, 200)
                self.assertEqual(Run.objects.get(pk=stale.pk).state, "running")

    def test_a_worker_that_finishes_after_the_sweeper_cannot_overwrite_the_failure(self):
        run = self.make_run("running", heartbeat=timezone.now() - timedelta(hours=1))
        lifecycle.sweep_lost_runs()
        self.assertFalse(lifecycle.finish(run.pk, "succeeded"))
        self.assertEqual(Run.objects.get(pk=run.pk).state, "failed")

    def test_stopping_the_studio_interrupts_the_runs_of_its_local_worker(self):
        run = self.make_run("running", heartbeat=timezone.now(), worker="local@here")
        other = self.make_run("running", heartbeat=timezone.now(), worker="gpu@elsewhere")
        self.assertEqual(lifecycle.interrupt_runs_of_worker("local@here", "studio stopped"), [run.pk])
        self.assertEqual(Run.objects.get(pk=run.pk).state, "interrupted")
        self.assertEqual(Run.objects.get(pk=other.pk).state, "running")

    def test_a_hung_attempt_that_goes_on_after_it_was_swept_writes_nothing_more_into_the_run(self):
        # A worker stopped with SIGSTOP is swept as lost; continued (SIGCONT), its trainer reports the step
        # it was in and a checkpoint on its way down. Those must not land in the run the studio ended.
        run = self.make_run("running", heartbeat=timezone.now(), worker="gpu@hung")
        reporter = DatabaseReporter(run.pk, attempt=0)
        report_step(reporter, 1)
        Run.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
        self.assertEqual(lifecycle.sweep_lost_runs(timeout_s=45), [run.pk])
        before = stored(run)
        report_step(reporter, 2)
        self.assertEqual(stored(run), before)
        self.assertTrue(reporter.superseded)
        self.assertEqual(reporter.pending, [])  # dropped, not kept to be tried again for ever

    def test_reports_of_a_superseded_attempt_are_dropped_and_the_newer_attempts_are_kept(self):
        # The sweeper restarted the run: attempt 1 runs it elsewhere and is at step 7.
        run = self.make_run("running", heartbeat=timezone.now(), restarts=1, last_step=7, worker="gpu@other")
        old, new = DatabaseReporter(run.pk, attempt=0), DatabaseReporter(run.pk, attempt=1)
        report_step(old, 3)
        self.assertEqual(stored(run), (0, 0, 0, 0, 7))  # progress not moved back, no checkpoint row
        report_step(new, 8)
        self.assertEqual(stored(run), (1, 1, 1, 3, 8))
        self.assertFalse(new.superseded)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="a server that ends a session; SQLite has none")
def test_a_worker_hung_inside_a_transaction_on_its_run_is_swept_once_the_server_ends_that_session():
    """A process stopped between a report's UPDATE of its run row and the COMMIT keeps the row locked; the
    option the studio's connections carry (studio.lib.database) makes the server end that session, so the
    sweeper's UPDATE goes through instead of waiting for ever. Here the option is 1 s; the suite's own
    connection waits at most 20 s for the lock, so without the option the sweep fails instead of hanging."""
    from tests.studio import people

    run = Run.objects.create(team=people.the_team(), name="r", spec={"checkpoint": {"max_restarts": 0}},
                             state="running", heartbeat=timezone.now() - timedelta(hours=1))  # fmt: skip
    params = connection.settings_dict
    hung = psycopg.connect(dbname=params["NAME"], user=params["USER"], password=params["PASSWORD"] or None,
                           host=params["HOST"], port=params["PORT"] or None, **postgres_options(1.0))  # fmt: skip
    try:
        # what studio.runs.events.record does in every report's transaction, never committed: the process hung
        hung.execute("UPDATE runs_run SET last_seq = last_seq + 1 WHERE id = %s", [run.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")
        try:
            assert lifecycle.sweep_lost_runs(timeout_s=45) == [run.pk]
        except OperationalError as exc:  # lock_timeout: the hung session was never ended
            pytest.fail(f"the sweeper waited behind the hung transaction: {exc}")
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
        run.refresh_from_db()
        assert run.state == "failed" and "worker lost" in run.error
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):  # the server ended the hung session
            hung.execute("SELECT 1")
    finally:
        hung.close()


def test_the_idle_in_transaction_option_is_in_milliseconds_and_0_turns_it_off():
    assert postgres_options(60) == {"options": "-c idle_in_transaction_session_timeout=60000"}
    assert postgres_options(0.5) == {"options": "-c idle_in_transaction_session_timeout=500"}
    assert postgres_options(0) == {}
    with pytest.raises(ValueError, match="0 \\(off\\) or more"):
        postgres_options(-1)


def test_a_worker_reserves_no_run_while_its_processes_are_busy():
    # Otherwise a worker whose one process runs (or hangs in) a run takes the next queued run too and holds it
    # there, while another worker is idle: the restart of a run lost to a hung process waited for it for ever
    # (bench/fault_hung_worker.py, case "pool"). Celery honours the setting on a Redis broker.
    from studio.celery import app

    assert app.conf.worker_disable_prefetch is True
    assert app.conf.worker_prefetch_multiplier == 1
