"""A run on a verifiers taskset through the studio's real Celery worker (tests/workers/worker_studio.py):
the demo experiment launched with the verifiers environment, its tasks as the prompts and its rubric a
`verifiers` criterion; the worker prepares the run (the package's own environment, made once by
tests/trainers/rollout/environments/verifiers_packages.py), the run succeeds with each reward
function's metric, and its provenance names the package. Slow: the sandbox imports verifiers."""

from __future__ import annotations

import json

import pytest

from tests.passes import first_pass_only
from tests.trainers.rollout.environments import verifiers_packages as packages
from tests.workers.worker_studio import studio_with_worker

pytestmark = [pytest.mark.slow, first_pass_only]  # its worker's studio is a SQLite file and a Redis of its own

OVERRIDES = {
    "algorithm": {"group_size": 2},
    "optim": {"prompts_per_step": 2, "micro_batch_size": 4},
    "data": {"path": None, "environment_dataset": True},
    "environment": {"kind": "verifiers", "max_turns": 1, "params": {
        "package": packages.NAME, "version": packages.VERSION, "taskset": "tiny_echo"}},
    "rubric": {"criteria": [{"name": "echo", "kind": "verifiers", "weight": 1.0}]},
}  # fmt: skip


def test_a_verifiers_run_succeeds_through_the_worker_with_each_reward_a_metric(tmp_path):
    root = packages.shared_root()
    packages.install(root)
    with studio_with_worker(tmp_path, "verifiers@%h", OVERRIDES, packages.environment_variables(root)) as studio:
        run_id = studio.launch(total_steps=1)
        run = studio.wait_until_finished(run_id, timeout=600)
        assert run["state"] == "succeeded", (run["error"], studio.log.read_text()[-3000:])
        keys = {key for (key,) in studio.query("SELECT DISTINCT key FROM runs_metricpoint WHERE run_id = ?", run_id)}
        assert {"reward/says_digit/mean", "reward/brief/mean", "reward/reply_chars/mean"} <= keys
        [(provenance,)] = studio.query("SELECT provenance FROM runs_run WHERE id = ?", run_id)
        package = json.loads(provenance)["environment"]["package"]
        assert package == {"name": packages.NAME, "version": "1.0", "verifiers": "0.4.0"}
        assert any(
            "verifiers environment rollout-test-tasksets==1.0: 4 tasks" in line for line in studio.log_lines(run_id)
        )
