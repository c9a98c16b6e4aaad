"""GPU leases (studio.fleet.leases) on a fake fleet: a worker's GPUs are what its fleet row says, no
CUDA anywhere. A GPU serves one run; a run gets all the GPUs it asks for on one worker or none; the
leases end with the run, however it ends (its worker, a cancel, the sweeper for a lost worker)."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

from django.db import IntegrityError, transaction
from django.utils import timezone

from studio.fleet import leases
from studio.fleet.models import GpuLease, WorkerNode
from studio.runs import lifecycle
from tests.studio.base import StudioTestCase


def gpus(*indices: int) -> list[dict]:
    return [{"index": i, "name": "NVIDIA H100", "memory_total_gb": 79.6, "memory_used_gb": 0.5, "utilization": 0}
            for i in indices]  # fmt: skip


class GpuLeaseTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.node = WorkerNode.record_start("gpu@a", ["gpu"], gpus(0, 1), concurrency=2)

    def running(self, devices: list[str], worker: str = "gpu@a"):
        run = self.make_run("queued")
        self.assertEqual(leases.take(run.pk, worker, devices, len(devices)), devices)
        self.assertTrue(lifecycle.start(run.pk, worker))
        return run

    def test_a_worker_lists_its_gpus_as_cuda_names_them(self):
        self.assertEqual(self.node.devices, ["0", "1"])

    def test_a_run_gets_all_its_gpus_on_one_worker_or_none(self):
        one = self.running(["0"])
        two = self.make_run("queued")
        self.assertIsNone(leases.take(two.pk, "gpu@a", ["0", "1"], 2))
        self.assertEqual(leases.held_by(two.pk), [])  # not one of them: all or none
        lifecycle.finish(one.pk, "succeeded")
        self.assertEqual(leases.take(two.pk, "gpu@a", ["0", "1"], 2), ["0", "1"])

    def test_the_preferred_gpu_is_taken_first(self):
        run = self.make_run("queued")
        self.assertEqual(leases.take(run.pk, "gpu@a", ["0", "1", "2", "3"], 2, prefer=["2"]), ["0", "2"])

    def test_one_gpu_never_serves_two_runs_even_when_two_takers_race(self):
        first, second = self.make_run("queued"), self.make_run("queued")
        GpuLease.objects.create(worker="gpu@a", device="1", run=first)
        with self.assertRaises(IntegrityError), transaction.atomic():
            GpuLease.objects.create(worker="gpu@a", device="1", run=second)
        # The same GPU of another worker is another GPU.
        GpuLease.objects.create(worker="gpu@b", device="1", run=second)

    def test_a_lease_taken_between_the_read_and_the_write_makes_the_taker_wait(self):
        first, second = self.make_run("queued"), self.make_run("queued")
        GpuLease.objects.create(worker="gpu@a", device="1", run=first)  # committed by another process...
        with mock.patch.object(leases, "_held", return_value=set()):  # ...after this one read the leases
            self.assertIsNone(leases.take(second.pk, "gpu@a", ["0", "1"], 2))
        self.assertEqual(leases.held_by(second.pk), [])
        self.assertEqual(leases.held_by(first.pk), ["1"])

    def test_leases_end_with_the_run_whoever_ends_it(self):
        done, cancelled = self.running(["0"]), self.running(["1"])
        lifecycle.finish(done.pk, "succeeded")
        lifecycle.request_cancel(cancelled)  # a running run: it stops at its next step, keeping its GPU till then
        self.assertEqual(leases.held_by(cancelled.pk), ["1"])
        lifecycle.finish(cancelled.pk, "cancelled")
        self.assertFalse(GpuLease.objects.exists())

    def test_a_lost_workers_gpus_come_back_when_the_sweeper_fails_its_runs(self):
        lost = self.running(["0", "1"])
        lost.__class__.objects.filter(pk=lost.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
        self.assertEqual(lifecycle.sweep_lost_runs(), [lost.pk])
        self.assertEqual(leases.held_by(lost.pk), [])
        self.assertEqual(leases.free_gpus("gpu@a", ["0", "1"]), ["0", "1"])

    def test_a_lease_left_by_a_run_that_ended_is_reclaimed_by_the_next_taker(self):
        ended = self.make_run("failed")
        GpuLease.objects.create(worker="gpu@a", device="0", run=ended)  # its worker died before releasing it
        run = self.make_run("queued")
        self.assertEqual(leases.take(run.pk, "gpu@a", ["0"], 1), ["0"])

    def test_the_waiting_reason_counts_the_free_gpus_of_every_online_worker(self):
        WorkerNode.record_start("gpu@b", ["gpu"], gpus(0), concurrency=1)
        WorkerNode.record_start("cpu@c", ["gpu"], [], concurrency=1)  # no GPUs: not a place for GPUs
        self.running(["0"])
        self.assertEqual(leases.waiting_reason(2, "gpu@a", ["0", "1"]),
                         "waiting for 2 free GPUs on one worker (1 free on gpu@a, 1 free on gpu@b)")  # fmt: skip
        self.assertEqual(leases.waiting_reason(4, "gpu@a", ["0", "1"]),
                         "waiting for 4 free GPUs on one worker (1 free on gpu@a, 1 free on gpu@b); "
                         "no worker has 4 GPUs (the most: 2 on gpu@a)")  # fmt: skip
        self.assertEqual(leases.waiting_reason(1, "gpu@a", ["0", "1"], own="0"),
                         "waiting for GPU 0 of gpu@a, which another run holds")  # fmt: skip

    def test_the_fleet_api_says_which_gpus_are_free(self):
        self.running(["1"])
        [node] = self.client_for(self.carol).get("/api/fleet/").json()
        self.assertEqual((node["gpu_count"], node["free_gpus"]), (2, ["0"]))

    def test_the_fleet_page_marks_the_gpus_a_run_holds(self):
        self.running(["1"])
        self.client.force_login(self.carol)
        page = self.client.get("/fleet/").content.decode()
        self.assertNotIn("#0 NVIDIA H100 — 0.5 / 79.6 GB · <b>held by a run</b>", page)
        self.assertIn("#1 NVIDIA H100 — 0.5 / 79.6 GB · <b>held by a run</b>", page)
