"""The worker's side of GPU leases, with a fake GPU inventory (workers.gpu.pool_gpus: which GPUs the
worker has, which one the pool process is pinned to) and no CUDA: two one-GPU runs and a two-GPU run
on a two-GPU worker. The two-GPU run waits, says what for, goes back to the queue, and starts once both
GPUs are free."""

from __future__ import annotations

from unittest import mock

from celery.exceptions import Retry
from django.conf import settings

from studio.fleet import leases
from studio.fleet.models import WorkerNode
from studio.runs import lifecycle
from studio.runs.models import Run
from tests.studio.base import StudioTestCase
from tests.studio.fleet.test_gpu_leases import gpus
from workers import gpu, launch, tasks
from workers.torchrun import GroupResult

WORKER = "gpu@a"


def pool(own: str | None):
    """This pool process on a worker with GPUs 0 and 1, pinned to `own`."""
    return mock.patch.object(gpu, "pool_gpus", return_value=gpu.PoolGpus(["0", "1"], own))


class WorkerGpuLeaseTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        WorkerNode.record_start(WORKER, ["gpu"], gpus(0, 1), concurrency=2)

    def queued(self, processes: int = 1) -> Run:
        spec = {**self.experiment.spec_config(), "parallel": {"procs_per_node": processes}}
        return Run.objects.create(team=self.team, experiment=self.experiment, name=f"{processes} GPUs", spec=spec)

    def statuses(self, run: Run) -> list[tuple[str, str]]:
        return [(e.payload["state"], e.payload["detail"]) for e in run.events.filter(kind="status").order_by("seq")]

    def test_two_one_gpu_runs_then_a_two_gpu_run_that_waits_says_so_and_starts_when_both_are_free(self):
        first, second, both = self.queued(), self.queued(), self.queued(processes=2)
        with pool("0"):
            self.assertEqual(launch.claim(first, WORKER), ["0"])
        with pool("1"):
            self.assertEqual(launch.claim(second, WORKER), ["1"])
        self.assertEqual(Run.objects.get(pk=first.pk).placement, "1 process on GPU 0")

        with pool("0"), self.assertRaises(launch.GpusBusy):
            tasks.execute_run(both.pk, WORKER)
        both.refresh_from_db()
        waiting = "waiting for 2 free GPUs on one worker (0 free on gpu@a)"
        self.assertEqual((both.state, both.waiting_for), ("queued", waiting))
        self.assertEqual(self.client_for(self.carol).get(f"/api/runs/{both.pk}/").json()["waiting_for"], waiting)

        # Through the task: back to the queue for GPU_WAIT_RETRY_S; the reason is logged once, not per try.
        task = mock.Mock(request=mock.Mock(hostname=WORKER))
        task.retry.return_value = Retry()
        with pool("1"), self.assertRaises(Retry):
            tasks._execute_or_wait(task, both.pk)
        task.retry.assert_called_once_with(countdown=settings.GPU_WAIT_RETRY_S)
        self.assertEqual(self.statuses(both), [("queued", waiting)])

        lifecycle.finish(first.pk, "succeeded")  # one GPU free is not enough
        with pool("0"), self.assertRaises(launch.GpusBusy):
            tasks.execute_run(both.pk, WORKER)
        self.assertEqual(Run.objects.get(pk=both.pk).waiting_for,
                         "waiting for 2 free GPUs on one worker (1 free on gpu@a)")  # fmt: skip

        lifecycle.finish(second.pk, "succeeded")
        started = mock.Mock(return_value=GroupResult("succeeded", "3 steps", 3))
        with pool("1"), mock.patch.object(launch, "run_processes", started):
            self.assertEqual(tasks.execute_run(both.pk, WORKER), "succeeded")
        self.assertEqual(started.call_args.args[4], ["0", "1"])  # the GPUs its processes get
        both.refresh_from_db()
        self.assertEqual((both.state, both.waiting_for, both.placement), ("succeeded", "", "2 processes on GPUs 0, 1"))
        self.assertEqual(self.statuses(both)[-2:], [("running", "started on gpu@a: 2 processes on GPUs 0, 1"),
                                                    ("succeeded", "3 steps")])  # fmt: skip
        self.assertEqual(leases.held_by(both.pk), [])

    def test_a_one_gpu_run_waits_for_its_pool_process_gpu_while_a_two_gpu_run_holds_it(self):
        both, one = self.queued(processes=2), self.queued()
        with pool("0"):
            self.assertEqual(launch.claim(both, WORKER), ["0", "1"])
        with pool("1"), self.assertRaises(launch.GpusBusy):
            launch.claim(one, WORKER)
        self.assertEqual(Run.objects.get(pk=one.pk).waiting_for, "waiting for GPU 1 of gpu@a, which another run holds")

    def test_a_run_cancelled_while_it_waited_is_not_started_and_holds_nothing(self):
        holder, waiting = self.queued(processes=2), self.queued(processes=2)
        with pool("0"):
            launch.claim(holder, WORKER)
            with self.assertRaises(launch.GpusBusy):
                launch.claim(waiting, WORKER)
        lifecycle.request_cancel(waiting)
        lifecycle.finish(holder.pk, "succeeded")
        with pool("0"):
            self.assertEqual(tasks.execute_run(waiting.pk, WORKER), "not-queued")
        waiting.refresh_from_db()
        self.assertEqual((waiting.state, waiting.waiting_for), ("cancelled", ""))
        self.assertEqual(leases.held_by(waiting.pk), [])

    def test_on_a_machine_without_gpus_runs_lease_nothing(self):
        run = self.queued(processes=2)
        with mock.patch.object(gpu, "pool_gpus", return_value=gpu.PoolGpus()):
            self.assertEqual(launch.claim(run, WORKER), [])
        run.refresh_from_db()
        self.assertEqual((run.state, run.placement), ("running", "2 processes on CPU (gloo)"))
