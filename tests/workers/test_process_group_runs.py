"""Runs of two processes, launched from the studio (studio.experiments.services.launch) and run by a
real Celery worker process (prefork pool, the embedded Redis broker, a SQLite file), started the way
`./studioctl worker --queues gpu` starts it. On this machine (no GPU) the worker starts the run's two
processes with torchrun as CPU processes on gloo; rank 0's reports reach the database through the
task's relay. Nothing in the studio, the worker or the trainer knows it is under test: a rank is
killed, and a run cancelled, from outside, as a person (or the kernel) would."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.passes import first_pass_only
from tests.workers.usage_checks import check_usage
from tests.workers.worker_studio import Studio, gone, studio_with_worker

pytestmark = first_pass_only

TWO_PROCESSES = {"parallel": {"procs_per_node": 2}, "algorithm": {"group_size": 2},
                 "optim": {"prompts_per_step": 2, "micro_batch_size": 4}}  # fmt: skip
STARTED = re.compile(r"rank (\d) of 2 started: pid (\d+)")


def rank_pids(studio: Studio, run_id: int) -> dict[int, int]:
    """{rank: pid} from the lines the task logs as each rank connects."""
    found = (STARTED.match(line) for line in studio.log_lines(run_id))
    return {int(m.group(1)): int(m.group(2)) for m in found if m}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with studio_with_worker(tmp_path_factory.mktemp("group-runs"), "group-test@%h", TWO_PROCESSES) as running:
        yield running


@pytest.mark.timeout(110)
def test_a_two_process_run_trains_to_the_end_reports_once_and_checkpoints(studio):
    run_id = studio.launch(total_steps=3)
    run = studio.wait_until_finished(run_id, 100)
    assert run["state"] == "succeeded", run["error"] + studio.log.read_text()[-3000:]
    assert run["placement"] == "2 processes on CPU (gloo)"
    assert studio.metric_steps(run_id) == [1, 2, 3]  # rank 0's reports, once each
    assert run["last_step"] == 3
    [(step, path)] = studio.query("SELECT step, path FROM runs_checkpoint WHERE run_id = ?", run_id)
    assert step == 3 and Path(path).is_dir()
    assert set(rank_pids(studio, run_id)) == {0, 1}
    steps = studio.query("SELECT DISTINCT step FROM runs_rollout WHERE run_id = ? ORDER BY step", run_id)
    assert steps == [(1,), (2,), (3,)]
    check_usage(**usage_facts(studio, run_id), processes=2)  # its two CPU processes' seconds and tokens (issue 41)


def usage_facts(studio: Studio, run_id: int) -> dict:
    """The run's recorded usage, its times, each step's metrics and its training rollouts' tokens, from the
    worker's database (for tests.workers.usage_checks.check_usage)."""
    [(usage, device_s, gpu_s, generated, trained, started, finished)] = studio.query(
        "SELECT usage, device_seconds, gpu_seconds, tokens_generated, tokens_trained, started, finished "
        "FROM runs_run WHERE id = ?", run_id)  # fmt: skip
    steps: dict[int, dict[str, float]] = {}
    for step, key, value in studio.query("SELECT step, key, value FROM runs_metricpoint WHERE run_id = ?", run_id):
        steps.setdefault(step, {})[key] = value
    [(tokens,)] = studio.query("SELECT SUM(num_tokens) FROM runs_rollout WHERE run_id = ? AND split = 'train'", run_id)
    recorded = {**json.loads(usage), "device_seconds": device_s, "gpu_seconds": gpu_s, "tokens_generated": generated,
                "tokens_trained": trained}  # fmt: skip
    return {"usage": recorded, "started": started, "finished": finished,
            "step_metrics": [steps[s] for s in sorted(steps)], "rollout_tokens": tokens}  # fmt: skip


@pytest.mark.timeout(110)
def test_a_killed_rank_fails_the_run_at_once_naming_it_and_stops_the_other(studio):
    run_id = studio.launch(total_steps=500)
    studio.wait(lambda: studio.metric_steps(run_id), 90, "no step reported")
    pids = rank_pids(studio, run_id)
    killed = time.monotonic()
    os.kill(pids[1], signal.SIGKILL)
    run = studio.wait_until_finished(run_id, 30)
    assert time.monotonic() - killed < 10  # within the default heartbeat interval
    assert run["state"] == "failed"
    assert run["error"].startswith("rank 1 failed: killed by SIGKILL"), run["error"]
    studio.wait(lambda: gone(pids.values()), 10, "rank 0 still running")
    lines = studio.log_lines(run_id)
    assert any(line.startswith("rank 0 stderr, last lines:") for line in lines)
    assert lines[-1].startswith("rank 1 stderr, last lines:")  # the failed rank's last: the error quotes it


@pytest.mark.timeout(110)
def test_a_cancelled_two_process_run_stops_every_process(studio):
    run_id = studio.launch(total_steps=500)
    studio.wait(lambda: studio.metric_steps(run_id), 90, "no step reported")
    pids = rank_pids(studio, run_id)
    assert studio.act("cancel", str(run_id)) == "running"  # asked to stop at the next step
    run = studio.wait_until_finished(run_id, 60)
    assert run["state"] == "cancelled", run["error"]
    assert 1 <= run["last_step"] < 500
    studio.wait(lambda: gone(pids.values()), 15, "a rank still running")


@pytest.mark.timeout(200)
def test_a_worker_stopped_while_a_two_process_run_trains_checkpoints_it_and_the_next_worker_resumes_it(studio):
    # Enough steps that the run cannot end by itself between its first report and the stop reaching rank 0
    # (8 steps did once, on a loaded machine: no restart to find).
    run_id = studio.launch(total_steps=24)
    studio.wait(lambda: studio.metric_steps(run_id), 90, "no step reported")
    pids = rank_pids(studio, run_id)
    [worker] = [w for w in studio.workers if w.poll() is None]
    worker.send_signal(signal.SIGTERM)  # the worker's main process only; torchrun and the ranks hear it via rank 0
    assert worker.wait(90) == 0
    studio.wait(lambda: gone(pids.values()), 15, "a rank still running")
    assert studio.run(run_id)["state"] == "queued", studio.run(run_id)
    [(from_step, lost, checkpoint)] = studio.query(
        "SELECT from_step, steps_lost, checkpoint FROM runs_runrestart WHERE run_id = ?", run_id
    )
    assert lost == 0 and from_step >= 1 and Path(checkpoint).name == f"step-{from_step}"
    studio.start_worker("group-test-2@%h")
    run = studio.wait_until_finished(run_id, 150)
    assert run["state"] == "succeeded", run["error"]
    assert studio.metric_steps(run_id) == list(range(1, 25))
