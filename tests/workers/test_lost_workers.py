"""A run whose worker stops sending heartbeats is marked failed with the reason (and, while its
automatic restarts last, queued again: tests/studio/runs/test_restarts.py; these runs have none)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from studio.runs import lifecycle
from studio.runs.models import Run
from tests.studio.base import StudioTestCase
from workers import gpu


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
