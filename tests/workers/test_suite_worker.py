"""A suite while a run trains, through a real Celery worker (prefork pool, embedded Redis, a SQLite file) and the
tiny model: every 2nd checkpoint of the demo experiment's run is scored by its suite in a job of its own, and the
scores become the training run's metric points suite/<task>/... at the checkpoint's step."""

from __future__ import annotations

import subprocess
import sys

import pytest

from launcher.processes import ROOT
from tests.passes import first_pass_only
from tests.workers.worker_studio import studio_with_worker

pytestmark = first_pass_only

QUICK = {"algorithm": {"group_size": 2}, "optim": {"prompts_per_step": 2, "micro_batch_size": 4},
         "checkpoint": {"every_n_steps": 1, "keep_last": 10}}  # fmt: skip


@pytest.mark.timeout(300)
def test_every_second_checkpoint_is_scored_and_becomes_suite_curves(tmp_path):
    with studio_with_worker(tmp_path, "suite-test@%h", QUICK) as studio:
        done = subprocess.run([sys.executable, "-m", "tests.workers.suite_actions", "attach", "2"], cwd=ROOT,
                              env=studio.env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        run_id = studio.launch(total_steps=4)
        assert studio.wait_until_finished(run_id, 180)["state"] == "succeeded"

        def suite_runs_done():
            rows = studio.query(
                "SELECT s.source_step, r.state FROM evaluations_suiterun s JOIN evaluations_suiteresult x "
                "ON x.suite_run_id = s.id JOIN runs_run r ON r.id = x.run_id WHERE s.source_run_id = ?",
                run_id,
            )
            return rows if rows and all(state in ("succeeded", "failed", "cancelled") for _, state in rows) else None

        rows = studio.wait(suite_runs_done, 180, "the suite runs did not end")
        assert sorted(rows) == [(2, "succeeded"), (2, "succeeded"), (4, "succeeded"), (4, "succeeded")], rows
        points = studio.query("SELECT key, step, value FROM runs_metricpoint WHERE run_id = ? AND key LIKE 'suite/%' "
                              "ORDER BY key, step", run_id)  # fmt: skip
        by_key: dict[str, list[tuple[int, float]]] = {}
        for key, step, value in points:
            by_key.setdefault(key, []).append((step, value))
        assert [s for s, _ in by_key["suite/anything/pass@1"]] == [2, 4]
        assert [v for _, v in by_key["suite/anything/pass@1"]] == [1.0, 1.0]  # every completion matches
        assert [s for s, _ in by_key["suite/has-a/reward_mean"]] == [2, 4]
        assert {"suite/has-a/pass@4", "suite/has-a/pass@4_low", "suite/has-a/pass@1_high"} <= set(by_key)
        # Each scored checkpoint's samples are its pairs' runs' rollouts, from that checkpoint.
        pairs = studio.query(
            "SELECT s.source_step, x.task, r.spec, (SELECT COUNT(*) FROM runs_rollout o WHERE o.run_id = r.id) "
            "FROM evaluations_suiterun s JOIN evaluations_suiteresult x ON x.suite_run_id = s.id "
            "JOIN runs_run r ON r.id = x.run_id WHERE s.source_run_id = ? ORDER BY s.source_step, x.task",
            run_id,
        )
        assert [(step, task, count) for step, task, _, count in pairs] == [
            (2, "anything", 6), (2, "has-a", 8), (4, "anything", 6), (4, "has-a", 8)]  # fmt: skip
        assert all(f"step-{step}" in spec for step, _, spec, _ in pairs)
