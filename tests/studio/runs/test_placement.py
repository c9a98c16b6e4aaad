"""Where a run's processes run (studio.runs.placement): one process in the task, several with torchrun
on one machine, several machines on a Ray cluster, which a launch is refused without."""

from __future__ import annotations

import pytest
from django.test import override_settings

from studio.runs import placement
from studio.runs.models import Checkpoint, Run
from tests.studio.base import StudioTestCase, model_folder


def spec(procs: int = 1, nodes: int = 1) -> dict:
    return {"parallel": {"procs_per_node": procs, "nodes": nodes}}


@pytest.mark.parametrize(("config", "kind", "how", "gpus"), [
    ({}, "train", placement.IN_PROCESS, 1),
    (spec(2), "train", placement.TORCHRUN, 2),
    (spec(2), "eval", placement.IN_PROCESS, 1),  # evaluation is one process
    (spec(4, 2), "train", placement.RAY, 0),  # the cluster places them
])  # fmt: skip
def test_the_launcher_follows_the_processes_asked_for(config, kind, how, gpus):
    assert placement.launcher(config, kind) == how
    assert placement.local_gpus(config, kind) == gpus


def test_where_a_run_runs_is_said_with_its_processes_and_gpus():
    assert placement.describe({}, "train") == "1 process on CPU"
    assert placement.describe({}, "train", ["3"]) == "1 process on GPU 3"
    assert placement.describe(spec(2), "train") == "2 processes on CPU (gloo)"
    assert placement.describe(spec(2), "train", ["0", "1"]) == "2 processes on GPUs 0, 1"
    assert placement.describe(spec(4, 2), "train") == "8 processes: 4 per node × 2 nodes (Ray)"


@override_settings(RAY_ADDRESS=None)  # whatever this machine's environment says
class RayRefusalTest(StudioTestCase):
    def launch(self, overrides: dict):
        return self.client_for(self.bob).post(f"/api/experiments/{self.experiment.pk}/launch/",
                                              {"overrides": overrides}, format="json")  # fmt: skip

    def test_a_run_on_several_nodes_is_refused_without_a_ray_cluster(self):
        response = self.launch(spec(2, 2))
        self.assertEqual(response.status_code, 400, response.content)
        self.assertIn("needs a Ray cluster", response.json()["parallel.nodes"])
        self.assertIn("STUDIO_RAY_ADDRESS", response.json()["parallel.nodes"])
        self.assertIn("set RAY_ADDRESS", response.json()["parallel.nodes"])
        self.assertIn("docs/gpu-workers.md", response.json()["parallel.nodes"])
        self.assertFalse(Run.objects.exists())

    def test_with_a_ray_cluster_configured_it_is_queued(self):
        with override_settings(RAY_ADDRESS="ray://head:10001"):
            response = self.launch(spec(2, 2))
        self.assertEqual(response.status_code, 201, response.content)

    def test_several_processes_on_one_machine_need_no_cluster(self):
        response = self.launch(spec(2))
        self.assertEqual(response.status_code, 201, response.content)
        run = self.client_for(self.carol).get(f"/api/runs/{response.json()['id']}/").json()
        self.assertEqual((run["spec"]["parallel"]["procs_per_node"], run["placement"]), (2, ""))  # said once started

    def test_resuming_a_run_on_several_nodes_is_refused_without_a_ray_cluster(self):
        run = self.make_run("failed")
        Run.objects.filter(pk=run.pk).update(spec={**run.spec, **spec(2, 2)})
        folder = model_folder(self.data_dir / "runs" / str(run.pk) / "step-3")
        Checkpoint.objects.create(run=run, step=3, path=str(folder))
        response = self.client_for(self.bob).post(f"/api/runs/{run.pk}/resume/")
        self.assertEqual(response.status_code, 409, response.content)
        self.assertIn("needs a Ray cluster", response.json()["detail"])

    def test_the_run_page_says_what_a_queued_run_waits_for_and_where_a_running_one_runs(self):
        self.client.force_login(self.carol)
        waiting = self.make_run("queued", waiting_for="waiting for 2 free GPUs on one worker (1 free on gpu@a)")
        page = self.client.get(f"/runs/{waiting.pk}/").content.decode()
        self.assertIn('<div class="run-detail note" data-run-detail>waiting for 2 free GPUs on one worker (1 free', page)
        running = self.make_run("running", placement="2 processes on GPUs 0, 1")
        page = self.client.get(f"/runs/{running.pk}/").content.decode()
        self.assertIn(">2 processes on GPUs 0, 1</span>", page)
