"""The fleet accounts for model servers (studio.serving's ModelServer, served by `workers.serve_model`):
a server's GPU lease keeps runs off its GPU, a run waiting behind a server says so in words (its
model, worker, idle time; another team's model unnamed), and the fleet page lists the servers that
hold places, with a stop for owners and editors of the model's team. Worker rows and leases are
written here as workers write them; no CUDA."""

from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.test import override_settings
from django.utils import timezone

from studio.fleet import leases
from studio.fleet.models import GpuLease, WorkerNode
from studio.runs import queueing
from studio.serving.models import FAILED, READY, STARTING, STOPPED, STOPPING, ModelServer
from tests.studio.base import StudioTestCase
from tests.studio.fleet.test_gpu_leases import gpus


@override_settings(SERVING_IDLE_S=600.0)
class ModelServerPlacesTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        WorkerNode.record_start("gpu@a", ["gpu"], gpus(0, 1), concurrency=1)
        self.trained = self.make_run("succeeded", name="trained")

    def serving(self, state: str = READY, idle_s: float = 120, device: str | None = "0", run=None) -> ModelServer:
        ref = f"run-{(run or self.trained).pk}/step-40"
        server = ModelServer.objects.create(ref=ref, model_path="/models/tiny", state=state, worker="gpu@a",
                                            started_by="bob", last_used=timezone.now() - timedelta(seconds=idle_s))  # fmt: skip
        if device is not None:
            self.assertTrue(leases.take_for_server(server.pk, "gpu@a", device))
        return server

    def test_a_served_gpu_is_not_free_and_a_run_waiting_for_it_says_which_model_server_holds_it(self):
        server = self.serving()
        self.assertEqual(leases.free_gpus("gpu@a", ["0", "1"]), ["1"])
        run = self.make_run("queued")
        self.assertIsNone(leases.take(run.pk, "gpu@a", ["0"], 1))
        self.assertEqual(leases.waiting_reason(1, "gpu@a", ["0", "1"], own="0", team_id=self.team.pk),
                         f"waiting for GPU 0 of gpu@a, which a model server ({server.ref} on gpu@a, started by bob, idle 2 min, "
                         "stops when idle in 8 min) holds")  # fmt: skip
        self.assertEqual(leases.waiting_reason(1, "gpu@a", ["0", "1"], own="0", team_id=self.other_team.pk),
                         "waiting for GPU 0 of gpu@a, which a model server of another team (on gpu@a, idle 2 min, "
                         "stops when idle in 8 min) holds")  # fmt: skip
        self.assertIn(f"; a model server ({server.ref} on gpu@a, started by bob, idle 2 min, stops when idle in 8 min) holds a GPU",
                      leases.waiting_reason(2, "gpu@a", ["0", "1"], team_id=self.team.pk))  # fmt: skip

    def test_a_lease_whose_server_stopped_holds_nothing_and_a_lease_has_exactly_one_holder(self):
        server = self.serving()
        ModelServer.objects.filter(pk=server.pk).update(state=FAILED)  # its worker died before releasing
        self.assertEqual(leases.free_gpus("gpu@a", ["0", "1"]), ["0", "1"])
        run = self.make_run("queued")
        self.assertEqual(leases.take(run.pk, "gpu@a", ["0"], 1), ["0"])
        self.assertFalse(GpuLease.objects.filter(model_server=server).exists())
        self.assertFalse(leases.take_for_server(server.pk, "gpu@a", "0"))  # the run's now
        with self.assertRaises(IntegrityError), transaction.atomic():
            GpuLease.objects.create(worker="gpu@a", device="1")  # neither a run nor a server

    def test_a_queued_run_behind_a_model_server_says_so_in_words(self):
        server = self.serving(device=None)  # a CPU machine's server: it holds its place, no GPU
        run = self.make_run("queued")
        self.assertEqual(
            queueing.waits_behind(run),
            "waiting for a free worker: the 'gpu' queue's 1 place (gpu@a) "
            f"is taken by a model server ({server.ref} on gpu@a, started by bob, idle 2 min, stops when idle in 8 min)",
        )
        self.assertEqual(
            queueing.waits_behind(run, name_runs=False),
            "waiting for a free worker: the 'gpu' queue's "
            "1 place (gpu@a) is taken by a model server (on gpu@a, idle 2 min, stops when idle in 8 min)",
        )
        theirs = self.make_run("queued", team=self.other_team)
        self.assertIn("taken by a model server of another team (on gpu@a, idle 2 min", queueing.waits_behind(theirs))
        ModelServer.objects.filter(pk=server.pk).update(state=STOPPED)
        self.assertIn("1 free place", queueing.waits_behind(run))

    def test_the_fleet_page_lists_model_servers_and_their_gpu_with_a_stop_for_editors(self):
        server = self.serving()
        for user, model, stop in ((self.bob, server.ref, True), (self.carol, server.ref, False),
                                  (self.charlie, "another team&#x27;s model", False)):  # fmt: skip
            self.client.force_login(user)
            page = self.client.get("/fleet/").content.decode()
            self.assertIn("#0 NVIDIA H100 — 0.5 / 79.6 GB · <b>held by a model server</b>", page)
            row = page[page.index(f'data-server="{server.pk}"') :].split("</tr>")[0]
            for text in (
                model,
                "<td>bob</td>" if user is not self.charlie else "<td></td>",
                "gpu@a",
                "<td>0</td>",
                READY,
                "idle 2 min, stops when idle in 8 min",
            ):
                self.assertIn(text, row, user.username)
            self.assertEqual(f"/fleet/servers/{server.pk}/stop" in row, stop, user.username)
            if user is self.charlie:
                self.assertNotIn(server.ref, page)

    def test_owners_and_editors_stop_a_server_viewers_and_outsiders_cannot(self):
        server = self.serving()
        url = f"/fleet/servers/{server.pk}/stop"
        for user, status in ((self.carol, 403), (self.charlie, 404)):
            self.client.force_login(user)
            self.assertEqual(self.client.post(url).status_code, status, user.username)
        self.assertEqual(ModelServer.objects.get(pk=server.pk).state, READY)
        self.client.force_login(self.bob)
        self.assertEqual(self.client.get(url).status_code, 405)
        self.assertRedirects(self.client.post(url), "/fleet/", fetch_redirect_response=False)
        self.assertEqual(ModelServer.objects.get(pk=server.pk).state, STOPPING)  # its task watches for this
        waiting = ModelServer.objects.create(ref=f"run-{self.trained.pk}/base", model_path="/m", state=STARTING)
        self.client.force_login(self.alice)
        self.client.post(f"/fleet/servers/{waiting.pk}/stop")
        self.assertEqual(ModelServer.objects.get(pk=waiting.pk).state, STOPPED)  # no task took it: nothing to wait for
        self.assertEqual(self.client.post("/fleet/servers/999999/stop").status_code, 404)

    def test_a_start_keeps_who_asked_for_it(self):
        from studio.serving import refs, servers

        ref = refs.ModelRef(name=f"run-{self.trained.pk}/base", run_id=self.trained.pk, team_id=self.team.pk,
                            model_path="/models/tiny")  # fmt: skip
        with self.captureOnCommitCallbacks(execute=False):
            server = servers.request_start(ref, by="API token 'ci'")
        self.assertEqual((server.state, ModelServer.objects.get(pk=server.pk).started_by), (STARTING, "API token 'ci'"))
