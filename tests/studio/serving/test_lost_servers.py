"""A model server whose process is gone does not hold its place or GPU for ever: a worker that stopped
or went silent ends its servers at the next heartbeat sweep (failed, with the reason, the lease
freed); a pool process killed under a running server ends it at once (the task_failure signal); a
start whose message was lost is sent again. Worker rows and leases are written as workers write
them; no CUDA, no model process."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

from billiard.exceptions import WorkerLostError
from django.test import override_settings
from django.utils import timezone

from studio.celery import SERVE_MODEL_TASK
from studio.fleet import leases
from studio.fleet.models import GpuLease, WorkerNode
from studio.serving import servers
from studio.serving.models import FAILED, READY, STARTING, STOPPING, ModelServer
from studio.serving.refs import ModelRef
from tests.studio.base import StudioTestCase
from tests.studio.fleet.test_gpu_leases import gpus
from workers import gpu, recovery


@override_settings(HEARTBEAT_TIMEOUT_S=45.0, SERVING_START_TIMEOUT_S=300.0)
class LostServersTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        WorkerNode.record_start("gpu@dead", ["gpu"], gpus(0), concurrency=1)
        WorkerNode.record_start("gpu@live", ["gpu"], gpus(0), concurrency=1)
        WorkerNode.objects.filter(hostname="gpu@dead").update(last_seen=timezone.now() - timedelta(seconds=120))

    def server(self, ref: str, worker: str, state: str = READY, generation: int = 1) -> ModelServer:
        server = ModelServer.objects.create(ref=ref, model_path="/models/tiny", state=state, worker=worker,
                                            generation=generation, address="http://127.0.0.1:1")  # fmt: skip
        self.assertTrue(leases.take_for_server(server.pk, worker, "0"))
        return server

    def test_a_silent_or_stopped_workers_servers_end_with_the_reason_and_free_their_gpus(self):
        dead = self.server("run-1/base", "gpu@dead")
        stopping = self.server("run-1/step-2", "gpu@gone", state=STOPPING)  # a worker with no row at all
        live = self.server("run-1/step-4", "gpu@live")
        gpu.beat("gpu@live", ["gpu"], 1)  # the live worker's heartbeat sweeps
        for ended in (dead, stopping):
            ended.refresh_from_db()
            self.assertEqual((ended.state, ended.address), (FAILED, ""))
            self.assertFalse(GpuLease.objects.filter(model_server=ended).exists())
        dead.refresh_from_db()
        self.assertEqual(dead.error, "its worker gpu@dead stopped or sent no heartbeat for over 45 s")
        live.refresh_from_db()
        self.assertEqual(live.state, READY)
        self.assertTrue(GpuLease.objects.filter(model_server=live).exists())

    def test_a_newer_start_of_the_same_model_is_left_alone(self):
        server = self.server("run-1/base", "gpu@live", generation=3)
        self.assertFalse(servers.end_lost_server(server.pk, 2, "an older attempt's process died"))
        server.refresh_from_db()
        self.assertEqual(server.state, READY)

    def test_a_killed_pool_process_ends_its_server_at_once(self):
        server = self.server("run-1/base", "gpu@live", generation=2)
        task = mock.Mock()
        task.name, task.request.hostname = SERVE_MODEL_TASK, "gpu@live"
        recovery._on_task_failure(sender=task, exception=WorkerLostError("signal 9 (SIGKILL)"), args=[server.pk, 2])
        server.refresh_from_db()
        self.assertEqual(server.state, FAILED)
        self.assertIn("its process died on gpu@live", server.error)
        self.assertFalse(GpuLease.objects.filter(model_server=server).exists())

    def test_a_start_no_worker_took_is_sent_again_after_the_start_timeout(self):
        ref = ModelRef(name="run-1/base", model_path="/models/tiny", checkpoint="", model_spec={}, team_id=self.team.pk,
                       run_id=1)  # fmt: skip
        with mock.patch("studio.serving.servers.app.send_task") as send, self.captureOnCommitCallbacks(execute=True):
            first = servers.request_start(ref)
        self.assertEqual((first.state, first.generation, send.call_count), (STARTING, 1, 1))
        with mock.patch("studio.serving.servers.app.send_task") as send, self.captureOnCommitCallbacks(execute=True):
            self.assertEqual(servers.request_start(ref).generation, 1)  # waiting on a start in flight
            self.assertEqual(send.call_count, 0)
            ModelServer.objects.filter(pk=first.pk).update(last_used=timezone.now() - timedelta(seconds=301))
            again = servers.request_start(ref)
        self.assertEqual((again.state, again.generation, send.call_count), (STARTING, 2, 1))
        send.assert_called_with(SERVE_MODEL_TASK, args=[first.pk, 2])
