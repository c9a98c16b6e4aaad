"""Shared GPUs: a worker with STUDIO_GPU_SHARE=N cuts each GPU into N leases (studio.fleet.leases), on the fake
fleet of the other lease tests (no CUDA). A one-process run takes one share of its pool process's GPU; a run of
several processes and a model server take every share of theirs; a team's GPUs count a share as its part; the
run's process is told its part (workers.tasks → trainers.scale.memory_share)."""

from __future__ import annotations

import os
from unittest import mock

from django.test import override_settings

from studio.fleet import leases
from studio.fleet.gpus import default_concurrency
from studio.fleet.models import GpuLease, TeamQuota, WorkerNode
from studio.runs import lifecycle
from studio.serving.models import ModelServer
from tests.studio.base import StudioTestCase
from tests.studio.fleet.test_gpu_leases import gpus
from trainers.scale import memory_share
from workers import gpu, launch, tasks

WORKER = "gpu@a"


def pool(own: str | None):
    return mock.patch.object(gpu, "pool_gpus", return_value=gpu.PoolGpus(["0", "1"], own))


class LeaseShareTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        WorkerNode.record_start(WORKER, ["gpu"], gpus(0, 1), concurrency=8)

    def share_of(self, device: str = "0", shares: int = 4):
        run = self.make_run("queued")
        taken = leases.take(run.pk, WORKER, [device], 1, part=True, shares=shares)
        if taken:
            lifecycle.start(run.pk, WORKER)
        return run, taken

    def test_four_runs_share_a_gpu_cut_in_four_and_a_fifth_waits(self):
        taken = [self.share_of() for _ in range(4)]
        self.assertEqual([devices for _, devices in taken], [["0"]] * 4)
        self.assertEqual(sorted(GpuLease.objects.values_list("slot", flat=True)), [0, 1, 2, 3])
        run, devices = self.share_of()
        self.assertIsNone(devices)
        self.assertEqual(leases.waiting_reason(1, WORKER, ["0", "1"], own="0", part=True),
                         "waiting for a share of GPU 0 of gpu@a: other runs hold 4 of its 4 shares")  # fmt: skip
        lifecycle.finish(taken[2][0].pk, "succeeded")  # a share comes back with its run
        self.assertEqual(self.share_of()[1], ["0"])
        self.assertEqual(leases.part_of(taken[0][0].pk), 0.25)
        self.assertEqual(leases.shares_in_use(WORKER), {"0": (4, 4)})

    def test_a_whole_gpu_run_takes_every_share_and_waits_while_any_share_is_held(self):
        self.share_of("0")
        pair = self.make_run("queued")
        self.assertIsNone(leases.take(pair.pk, WORKER, ["0", "1"], 2, shares=4))  # GPU 0 has a share held
        self.assertEqual(leases.free_gpus(WORKER, ["0", "1"]), ["1"])
        whole = self.make_run("queued")
        self.assertEqual(leases.take(whole.pk, WORKER, ["0", "1"], 1, shares=4), ["1"])
        self.assertEqual(GpuLease.objects.filter(run=whole).count(), 4)
        self.assertIsNone(leases.part_of(whole.pk))
        self.assertIsNone(self.share_of("1")[1])  # nothing of GPU 1 is left to share

    def test_a_model_server_holds_its_whole_gpu_on_a_sharing_worker(self):
        server = ModelServer.objects.create(ref=f"run-{self.make_run('succeeded').pk}/step-1", worker=WORKER,
                                            state="ready")  # fmt: skip
        self.assertTrue(leases.take_for_server(server.pk, WORKER, "0", shares=4))
        self.assertIsNone(self.share_of("0")[1])
        self.assertEqual(leases.held_by_servers(WORKER), ["0"])

    def test_a_gpu_cut_another_way_is_shared_again_once_its_leases_end(self):
        first, _ = self.share_of("0", shares=2)  # taken before the worker restarted with STUDIO_GPU_SHARE=4
        self.assertIsNone(self.share_of("0", shares=4)[1])
        lifecycle.finish(first.pk, "succeeded")
        self.assertEqual(self.share_of("0", shares=4)[1], ["0"])

    def test_a_teams_gpus_count_each_share_as_its_part(self):
        for _ in range(3):
            self.share_of("0")
        pair = self.make_run("queued")
        leases.take(pair.pk, WORKER, ["1"], 1, shares=4)
        self.assertAlmostEqual(leases.team_gpus(self.team.pk), 1.75)
        self.assertEqual(leases.team_gpus(self.other_team.pk), 0)

    def test_the_fleet_page_says_how_many_shares_of_a_gpu_runs_hold(self):
        self.share_of("0")
        self.share_of("0")
        self.client.force_login(self.carol)
        page = self.client.get("/fleet/").content.decode()
        self.assertIn("#0 NVIDIA H100 — 0.5 / 79.6 GB · <b>held by runs (2 of its 4 shares)</b>", page)

    def test_a_sharing_worker_starts_a_pool_process_per_share(self):
        self.assertEqual(default_concurrency("gpu", gpus(0, 1), share=4), 8)
        with mock.patch.dict(os.environ, {"STUDIO_GPU_SHARE": "3"}):
            self.assertEqual(default_concurrency("gpu", gpus(0, 1)), 6)
        self.assertEqual(default_concurrency("default", gpus(0, 1), share=4), 1)


@override_settings(GPU_SHARE=4)
class WorkerShareTest(StudioTestCase):
    """The worker's claim on a worker that shares its GPUs (settings.GPU_SHARE), and what the run is told."""

    def setUp(self) -> None:
        super().setUp()
        WorkerNode.record_start(WORKER, ["gpu"], gpus(0, 1), concurrency=8)

    def queued(self, processes: int = 1):
        spec = {**self.experiment.spec_config(), "parallel": {"procs_per_node": processes}}
        return self.make_run("queued", spec=spec, celery_task_id="sent")

    def test_one_process_runs_share_their_pool_process_gpu_and_a_team_limit_counts_shares(self):
        TeamQuota.objects.create(team=self.team, max_gpus=1)
        runs = [self.queued() for _ in range(5)]
        with pool("0"):
            for run in runs[:4]:
                self.assertEqual(launch.claim(run, WORKER), ["0"])
            self.assertEqual(leases.team_gpus(self.team.pk), 1.0)  # four quarters
            with self.assertRaises(launch.GpusBusy):
                launch.claim(runs[4], WORKER)
        runs[4].refresh_from_db()
        self.assertEqual(runs[4].waiting_for, "waiting for its team's limits: team Alice's team has 1 of its 1 GPU in use")
        self.assertEqual(runs[0].__class__.objects.get(pk=runs[0].pk).placement, "1 process on GPU 0")

    def test_a_run_of_several_processes_takes_whole_gpus(self):
        with pool("0"):
            self.assertEqual(launch.claim(self.queued(processes=2), WORKER), ["0", "1"])
        self.assertEqual(GpuLease.objects.count(), 8)

    def test_the_run_on_a_share_is_told_its_part_and_the_pool_process_forgets_it_after(self):
        run = self.queued()
        seen = {}

        def train(spec, reporter, should_stop):
            seen["share"] = memory_share.current()
            seen["vllm"] = memory_share.scaled_utilization(spec.rollout.vllm_gpu_memory_utilization)
            return mock.Mock(status="succeeded", detail="done")

        # The trainer is a stand-in that reports what it was told (the real one's memory cap needs CUDA:
        # tests/trainers/scale/test_memory_share.py checks it where a GPU is).
        with pool("0"), mock.patch("trainers.run.loop.train", train), \
                mock.patch.object(memory_share, "cap_allocator", wraps=memory_share.cap_allocator) as cap:  # fmt: skip
            self.assertEqual(tasks.execute_run(run.pk, WORKER), "succeeded")
        self.assertEqual(seen, {"share": 0.25, "vllm": 0.075})  # 0.3 of a quarter GPU
        cap.assert_called_once_with(0.25)
        self.assertIsNone(memory_share.current())
