"""Two runs of one team claimed at once by two pool processes, one place left under the team's limit: exactly one
starts. Real transactions on the real database from two threads (each its own connection, as two pool
processes have); the first claim is held still right after it counted the team's running runs, and the
second must not get past its own count until the first has committed (PostgreSQL: the team's row lock,
studio.fleet.quotas.lock; SQLite: the write lock an IMMEDIATE transaction takes at BEGIN). Without that, both
would count 0 running and both would start.

The suite's SQLite test database is in memory with a shared cache, where a connection that finds the write
lock taken is told "database table is locked" at once instead of waiting out the busy timeout as it does on
the studio's database file: here the second claim tries again until it gets the lock, which is that wait."""

from __future__ import annotations

import threading
import time
from unittest import mock

from django.db import OperationalError, connection, connections
from django.test import TransactionTestCase

from studio.accounts.models import Team
from studio.fleet import quotas
from studio.fleet.models import TeamQuota, WorkerNode
from studio.runs.models import QUEUED, RUNNING, Run
from tests.studio.fleet.test_gpu_leases import gpus
from workers import gpu, launch

WORKER = "gpu@a"


class LastPlaceRaceTest(TransactionTestCase):
    def setUp(self) -> None:
        WorkerNode.record_start(WORKER, ["gpu"], gpus(0, 1), concurrency=2)
        self.team = Team.objects.create(name="ml-a")
        TeamQuota.objects.create(team=self.team, max_running_runs=1)
        self.runs = [Run.objects.create(team=self.team, name=f"trial-{i}", spec={}, celery_task_id="sent")
                     for i in range(2)]  # fmt: skip

    def test_two_simultaneous_claims_cannot_both_take_the_teams_last_place(self):
        counted, go_on = threading.Event(), threading.Event()
        first_thread: list[int] = []
        real_count = quotas.running_runs

        def running_runs(team_id: int) -> int:
            n = real_count(team_id)
            if threading.get_ident() == first_thread[0]:
                counted.set()  # the first claim has counted; it commits only when told
                assert go_on.wait(30)
            return n

        outcomes: dict[int, object] = {}

        def claim(run: Run, own: str) -> None:
            deadline = time.monotonic() + 30
            try:
                while True:
                    try:
                        with mock.patch.object(gpu, "pool_gpus", return_value=gpu.PoolGpus(["0", "1"], own)):
                            outcomes[run.pk] = launch.claim(run, WORKER)
                        return
                    except launch.GpusBusy as exc:
                        outcomes[run.pk] = exc
                        return
                    except OperationalError as exc:  # the shared-cache lock (see the module doc): wait for it
                        if "locked" not in str(exc) or time.monotonic() > deadline:
                            raise
                        time.sleep(0.02)
            finally:
                connection.close()  # this thread's own connection

        with mock.patch.object(quotas, "running_runs", running_runs):
            first = threading.Thread(target=claim, args=(self.runs[0], "0"))
            second = threading.Thread(target=claim, args=(self.runs[1], "1"))
            first.start()
            first_thread.append(first.ident)
            self.assertTrue(counted.wait(30))
            second.start()
            second.join(1.0)  # it must be waiting on the first's lock, not done
            self.assertTrue(second.is_alive(), f"the second claim went past the first's uncommitted count: {outcomes}")
            go_on.set()
            first.join(30)
            second.join(60)

        self.assertEqual(outcomes[self.runs[0].pk], ["0"])
        self.assertIsInstance(outcomes[self.runs[1].pk], launch.GpusBusy)
        states = dict(Run.objects.values_list("pk", "state"))
        self.assertEqual([states[run.pk] for run in self.runs], [RUNNING, QUEUED])
        self.assertIn("team ml-a has 1 of its 1 run at once running", Run.objects.get(pk=self.runs[1].pk).waiting_for)

    def tearDown(self) -> None:
        connections.close_all()
