"""Runs on several nodes: a Ray cluster of two nodes on this machine (one CPU each, so no node can hold
both ranks), a run of parallel.nodes 2 launched from the studio (studio.experiments.services.launch) and
run by a real Celery worker process (prefork pool, embedded Redis broker, SQLite file) whose settings
name the cluster (RAY_ADDRESS). The worker's task is the Ray driver: Ray Train starts one rank per node
(CPU processes on gloo here), rank 0's reports reach the database through the driver, and a rank killed
or a run cancelled from outside ends the run as it should.

Then trainers.scale.ray_cluster.train_on_ray called directly, on the same cluster: the two nodes take the
one-process step on a fixed batch (the loss is the same function of the weights, so its gradient is the
one-process gradient), and ranks that never stop are killed after the grace period.

Skipped only where Ray cannot be imported (./studioctl setup installs it; CI has it)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed here (./studioctl setup installs ray[train])")

from tests.passes import first_pass_only  # noqa: E402
from tests.workers.worker_studio import Studio, gone, studio_with_worker  # noqa: E402

pytestmark = first_pass_only

TWO_NODES = {"parallel": {"nodes": 2, "procs_per_node": 1}, "algorithm": {"group_size": 2},
             "optim": {"prompts_per_step": 2, "micro_batch_size": 4}}  # fmt: skip
WHERE = re.compile(r"rank (\d): .* \(Ray node (\w+)\), pid (\d+)$")
MB = 2**20


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes of one CPU each (no dashboard, small object stores): a run of two ranks must use both."""
    from ray.cluster_utils import Cluster

    nodes = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * MB, "include_dashboard": False},
    )
    nodes.add_node(num_cpus=1, object_store_memory=80 * MB)
    nodes.wait_for_nodes()
    yield nodes
    nodes.shutdown()


def rank_places(studio: Studio, run_id: int) -> dict[int, tuple[str, int]]:
    """{rank: (Ray node id prefix, pid)} from the lines the driver logs as each rank starts."""
    found = (WHERE.match(line) for line in studio.log_lines(run_id))
    return {int(m.group(1)): (m.group(2), int(m.group(3))) for m in found if m}


@pytest.fixture(scope="module")
def studio(cluster, tmp_path_factory):
    env = {"RAY_ADDRESS": cluster.address, "STUDIO_HEARTBEAT_INTERVAL_S": "1"}
    with studio_with_worker(tmp_path_factory.mktemp("ray-runs"), "ray-test@%h", TWO_NODES, env) as running:
        yield running


@pytest.mark.timeout(150)
def test_a_two_node_run_from_the_studio_trains_on_both_nodes_reports_once_and_checkpoints(studio):
    run_id = studio.launch(total_steps=2)
    run = studio.wait_until_finished(run_id, 140)
    assert run["state"] == "succeeded", run["error"] + studio.log.read_text()[-3000:]
    assert run["placement"] == "2 processes: 1 per node × 2 nodes (Ray)"
    assert studio.metric_steps(run_id) == [1, 2]  # rank 0's reports, once each
    assert run["last_step"] == 2
    [(step, path)] = studio.query("SELECT step, path FROM runs_checkpoint WHERE run_id = ?", run_id)
    assert step == 2 and Path(path).is_dir()
    ranks = rank_places(studio, run_id)
    assert set(ranks) == {0, 1} and ranks[0][0] != ranks[1][0]  # one rank on each Ray node
    steps = studio.query("SELECT DISTINCT step FROM runs_rollout WHERE run_id = ? ORDER BY step", run_id)
    assert steps == [(1,), (2,)]
    # The task's heartbeat went on while the Ray job ran (a beat a second here; the run took far longer).
    started, beat = (time.mktime(time.strptime(run[k][:19], "%Y-%m-%d %H:%M:%S")) for k in ("started", "heartbeat"))
    assert beat - started >= 5


@pytest.mark.timeout(150)
def test_a_killed_ray_worker_fails_the_run_naming_its_rank_and_why(studio):
    run_id = studio.launch(total_steps=500)
    studio.wait(lambda: studio.metric_steps(run_id), 120, "no step reported")
    ranks = rank_places(studio, run_id)
    os.kill(ranks[1][1], signal.SIGKILL)
    run = studio.wait_until_finished(run_id, 60)
    assert run["state"] == "failed"
    assert run["error"].startswith("rank 1 on "), run["error"]
    assert f"pid {ranks[1][1]} died: The actor is dead because its worker process has died" in run["error"]
    studio.wait(lambda: gone(pid for _, pid in ranks.values()), 20, "rank 0 still running")
    lines = studio.log_lines(run_id)
    assert any(line.startswith("rank 1 died:") for line in lines)  # the full error, in the run's log
    assert lines[-1].startswith("the ranks' Ray logs, last lines:")  # last: the run's error quotes it
    assert "last log lines" in run["error"]


@pytest.mark.timeout(150)
def test_a_cancelled_two_node_run_stops_every_ray_worker(studio):
    run_id = studio.launch(total_steps=500)
    studio.wait(lambda: studio.metric_steps(run_id), 120, "no step reported")
    ranks = rank_places(studio, run_id)
    assert studio.act("cancel", str(run_id)) == "running"  # asked to stop at the next step
    run = studio.wait_until_finished(run_id, 60)
    assert run["state"] == "cancelled", run["error"]
    assert 1 <= run["last_step"] < 500
    studio.wait(lambda: gone(pid for _, pid in ranks.values()), 20, "a Ray worker still running")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from trainers.demos.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def fixed_batch_spec(model: Path, folder: Path, nodes: int):
    from tests.trainers.helpers import tiny_spec

    out = folder / f"nodes{nodes}"
    out.mkdir(parents=True)
    spec = tiny_spec(model, folder, optim={"micro_batch_size": 2, "max_grad_norm": None},
                     parallel={"nodes": nodes, "procs_per_node": 1}, checkpoint={"output_dir": str(out)})  # fmt: skip
    return spec, out


@pytest.mark.timeout(150)
def test_two_ray_nodes_take_the_one_process_step_and_ranks_that_do_not_stop_are_killed(cluster, tiny_model, tmp_path):
    """The trainer's optimisation pass on 5 completions of 1 to 8 tokens (tests.trainers.distributed_loss_worker),
    split over the two nodes' ranks or all on rank 0, steps with the gradient one process computes on the
    whole batch, for each loss aggregation mode: the Ray-launched ranks compute the single-process loss.
    (A whole run's curves cannot be compared: each rank samples its own completions with its own seed.)
    Then the ranks hang, as in a step that never ends: a stop kills them after the grace period."""
    import torch

    from tests.trainers.distributed_loss_worker import MODES
    from tests.trainers.test_distributed import assert_same_as_alone
    from tests.workers.ray_loops import fixed_batch_gradients, gradients_then_stuck
    from trainers.report import MemoryReporter
    from trainers.scale.ray_cluster import train_on_ray

    alone_spec, alone_out = fixed_batch_spec(tiny_model, tmp_path, nodes=1)
    fixed_batch_gradients(alone_spec, MemoryReporter(), lambda: False)  # this process, no Ray
    spec, out = fixed_batch_spec(tiny_model, tmp_path, nodes=2)
    reporter = MemoryReporter()
    stuck = lambda: sum("is stuck" in line for line in reporter.lines) == 2  # noqa: E731 - both ranks are
    result = train_on_ray(spec, reporter, stuck, address=cluster.address, stop_grace_s=2, loop=gradients_then_stuck)
    assert result.status == "cancelled" and result.detail.startswith("stopped by force 2 s after"), result.detail
    pids = [int(m.group(3)) for m in map(WHERE.match, reporter.lines) if m]
    assert len(pids) == 2
    deadline = time.monotonic() + 20
    while not gone(pids) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert gone(pids), "a rank outlived the forced stop"

    reference = torch.load(alone_out / "grads-world1-rank0.pt")
    ranks = [torch.load(out / f"grads-world2-rank{r}.pt") for r in range(2)]
    assert set(ranks[0]) >= {f"{mode}/{split}" for mode in MODES for split in ("shard", "filtered")}
    # The same comparison as the torchrun runs': each gradient (and the no-grad logprobs, the exported
    # weights) equal on both ranks and to the one process's.
    assert_same_as_alone(ranks, reference)
    assert any(g.abs().max() > 1e-3 for g in reference["token-mean/shard"].values())  # a real gradient
