"""trainers.scale.ray_cluster without a cluster: where the ranks go, how they agree to stop, how a failure
is told. (The runs on a real two-node Ray cluster are in tests/workers/test_ray_runs.py.)"""

import subprocess
import sys
from pathlib import Path

import pytest

from trainers.models import hub
from trainers.scale.ray_cluster import ClusterError, Mailbox, explain_failure, place

ROOT = Path(__file__).resolve().parents[2]


def node(node_id: str, alive: bool = True, **resources: float) -> dict:
    return {"NodeID": node_id, "Alive": alive, "Resources": resources}


def test_each_node_holds_procs_per_node_consecutive_ranks():
    nodes = [node("a", CPU=8, GPU=4), node("b", CPU=8, GPU=4), node("c", CPU=8, GPU=4)]
    placement = place(nodes, {"a": {"GPU": 0}, "b": {"GPU": 4, "CPU": 8}, "c": {"GPU": 2, "CPU": 8}}, 2, 4)
    assert placement.node_ids == ("b", "c")  # the freest first; "a" is busy
    assert placement.use_gpu and placement.resources_per_worker == {"CPU": 1.0, "GPU": 1.0}
    assert placement.num_workers == 8
    assert placement.label_selector == [{"ray.io/node-id": "b"}] * 4 + [{"ray.io/node-id": "c"}] * 4


def test_a_cluster_without_gpus_places_cpu_processes():
    placement = place([node("h", CPU=0), node("x", CPU=2), node("y", CPU=1)], {}, 2, 1)
    assert (placement.node_ids, placement.use_gpu) == (("x", "y"), False)  # the CPU-less head holds none
    assert placement.resources_per_worker == {"CPU": 1.0}


def test_too_few_nodes_with_room_is_refused_with_what_is_missing():
    nodes = [node("a", CPU=8, GPU=8), node("b", CPU=8, GPU=2), node("c", alive=False, CPU=8, GPU=8)]
    with pytest.raises(ClusterError, match=r"2 nodes x 4 processes.*1 node\(s\) with room.*docs/gpu-workers.md"):
        place(nodes, {}, 2, 4)


def test_every_rank_gets_the_same_nth_stop_answer_whenever_it_asks():
    box = Mailbox()
    assert box.should_stop(0) is False  # step 1: rank 0 asks first and decides "go on"
    box.request_stop()
    assert box.should_stop(1) is False  # rank 1, asking later about step 1, gets the same answer
    assert box.should_stop(1) is True  # step 2: decided after the request
    assert box.should_stop(0) is True


def test_the_mailbox_hands_events_over_once_in_order_and_says_where_ranks_run():
    box = Mailbox()
    box.hello(1, {"host": "gpu-b", "node": "f" * 40, "pid": 7}, actor=None)
    box.put({"kind": "metrics", "step": 1, "values": {}})
    assert box.take() == [
        {"kind": "log", "line": "rank 1: gpu-b (Ray node ffffffffffff), pid 7"},
        {"kind": "metrics", "step": 1, "values": {}},
    ]
    assert box.take() == []
    assert box.where() == {1: {"host": "gpu-b", "node": "f" * 40, "pid": 7}}


class ActorDiedError(Exception):
    """Stands for ray.exceptions.ActorDiedError (matched by name)."""


class WorkerGroupError(Exception):
    def __init__(self, worker_failures):
        super().__init__("Training failed due to worker errors")
        self.worker_failures = worker_failures


def test_a_failure_names_the_rank_that_died_before_the_ranks_that_failed_after_it():
    died = ActorDiedError(
        "The actor died unexpectedly before finishing this task.\n\tclass_name: RayTrainWorker\nThe actor is dead "
        "because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
        "unexpectedly exits with a connection error code 2. End of file. Some common causes include: ..."
    )
    error = WorkerGroupError({0: RuntimeError("gloo: Connection reset by peer"), 1: died})
    where = {1: {"host": "gpu-b", "node": "abc", "pid": 42}}
    message, details = explain_failure(error, where)
    assert message.startswith("rank 1 on gpu-b (Ray node abc), pid 42 died: The actor is dead because its worker")
    assert "End of file." in message and "Some common causes" not in message
    assert message.endswith("(then rank 0 failed: RuntimeError: gloo: Connection reset by peer)")
    assert details[0].startswith("rank 1 died:") and details[1].startswith("rank 0 failed:")


def test_a_plain_failure_of_the_ranks_is_the_runs_error_as_it_stands():
    """A model no rank can download ends the run with the one line saying what to do, as in one process,
    unwrapped from the error Ray hands back (whose text carries the rank's traceback)."""
    from ray.exceptions import RayTaskError

    line = hub.failure_line("org/name", "huggingface.co cannot be reached from this worker")
    wrapped = RayTaskError("train_fn", "Traceback (most recent call last):\n  ...", hub.ModelDownloadError(line))
    error = WorkerGroupError({1: wrapped.as_instanceof_cause(), 0: wrapped.as_instanceof_cause()})
    message, details = explain_failure(error, {0: {"host": "gpu-a", "node": "abc", "pid": 4}})
    assert message == line
    assert [block.split("\n")[0] for block in details] == ["rank 0 failed:", "rank 1 failed:"]


def test_a_failure_outside_the_ranks_is_told_as_the_job_failing():
    message, details = explain_failure(ValueError("placement group could not be created\nmore"), {})
    assert message == "the Ray job failed: ValueError: placement group could not be created"
    assert "ValueError" in details[0]


def test_loading_the_module_loads_neither_ray_nor_the_trainer():
    code = "import sys, trainers.scale.ray_cluster; print(sorted(m for m in ('ray', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
