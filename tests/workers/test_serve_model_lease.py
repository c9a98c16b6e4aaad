"""workers.serve_model leases its pool process's GPU to the model server while it serves and gives it
back when it ends (so runs and the fleet see it held, then free), and refuses clearly when a run holds
that GPU. The engine's process is not started: `_serve` (tested with the real engines in
tests/studio/serving) is replaced by a stand-in that records what the fleet saw meanwhile."""

from __future__ import annotations

import socket
from unittest import mock

from studio.fleet import leases
from studio.fleet.models import GpuLease
from studio.serving.models import FAILED, STARTING, STOPPED, ModelServer
from tests.studio.base import StudioTestCase
from workers import gpu
from workers.serving import task


class ServeModelLeaseTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.host = socket.gethostname()  # the task's worker name when it runs outside a worker (apply)
        run = self.make_run("succeeded")
        self.server = ModelServer.objects.create(ref=f"run-{run.pk}/base", model_path="/models/tiny", state=STARTING,
                                                 generation=1)  # fmt: skip
        for patch in (mock.patch.object(gpu, "pool_gpus", return_value=gpu.PoolGpus(["0", "1"], "1")),
                      mock.patch.object(task, "_policy_problem", return_value=None)):  # fmt: skip
            patch.start()
            self.addCleanup(patch.stop)

    def test_it_holds_its_gpu_while_it_serves_and_releases_it_at_the_end(self):
        seen = {}

        def serve(server, mine, stop):
            seen["held"] = list(GpuLease.objects.filter(model_server=server).values_list("worker", "device"))
            seen["free"] = leases.free_gpus(self.host, ["0", "1"])
            mine.update(state=STOPPED)
            return STOPPED

        with mock.patch.object(task, "_serve", side_effect=serve):
            self.assertEqual(task.serve_model.apply(args=[self.server.pk, 1]).get(), STOPPED)
        self.assertEqual(seen, {"held": [(self.host, "1")], "free": ["0"]})
        self.assertFalse(GpuLease.objects.filter(model_server=self.server).exists())

    def test_a_crash_while_serving_still_releases_the_gpu(self):
        with (
            mock.patch.object(task, "_serve", side_effect=RuntimeError("engine blew up")),
            self.assertRaises(RuntimeError),
        ):
            task.serve_model.apply(args=[self.server.pk, 1]).get()
        self.assertFalse(GpuLease.objects.filter(model_server=self.server).exists())

    def test_a_gpu_a_run_holds_is_refused_in_words(self):
        holder = self.make_run("queued")
        self.assertEqual(leases.take(holder.pk, self.host, ["0", "1"], 2), ["0", "1"])
        with mock.patch.object(task, "_serve") as serve:
            self.assertEqual(task.serve_model.apply(args=[self.server.pk, 1]).get(), FAILED)
        serve.assert_not_called()
        self.server.refresh_from_db()
        self.assertEqual(self.server.error, f"GPU 1 of {self.host} is held by a run; try again when it ends")
