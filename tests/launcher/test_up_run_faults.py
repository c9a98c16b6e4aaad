"""A run training under a real `up` through two of the issue's faults, as a new user meets them:

- the embedded Redis killed with SIGKILL while the run trains: `up` starts it again, and the run goes
  on (nothing it reported is lost: the reports go to the database, the broker carries none of them);
- the studio stopped with Ctrl-C while the run trains: the run saves a checkpoint at the end of the
  step under way and ends interrupted; the next `up` resumes it from there, losing no step.

At the end every step is stored once. The times printed are the issue note's (run with -s)."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from launcher.processes import free_port
from tests.launcher.studio_up import PASSWORD, start_up
from tests.launcher.test_up_restarts import child, until

STEPS = 40
QUICK = {"algorithm": {"group_size": 2}, "optim": {"prompts_per_step": 2, "micro_batch_size": 4, "total_steps": STEPS},
         "checkpoint": {"every_n_steps": 10}}  # fmt: skip


class Api:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        token = httpx.post(f"{self.base}/api/token/", data={"username": "admin", "password": PASSWORD}).json()["token"]
        self.headers = {"Authorization": f"Token {token}"}

    def get(self, path: str) -> dict:
        response = httpx.get(self.base + path, headers=self.headers, timeout=10)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: dict) -> dict:
        response = httpx.post(self.base + path, json=body, headers=self.headers, timeout=30)
        assert response.status_code == 201, response.text
        return response.json()


def rows(data_dir: Path, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(data_dir / "studio.sqlite3", timeout=30) as db:
        return db.execute(sql, args).fetchall()


def run_row(data_dir: Path, run_id: int) -> dict:
    [(state, step, restarts)] = rows(data_dir, "SELECT state, last_step, restarts FROM runs_run WHERE id = ?", run_id)
    return {"state": state, "last_step": step, "restarts": restarts}


def stop(proc) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(120)
    except Exception:  # noqa: BLE001 - leave nothing behind
        proc.kill()
        raise


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_a_run_goes_on_through_a_redis_death_and_resumes_after_the_studio_is_stopped(tmp_path):
    port = free_port()
    proc, output = start_up(tmp_path, port)
    try:
        api = Api(port)
        [demo] = [e for e in api.get("/api/experiments/")["results"] if e["name"].startswith("Demo: tiny model")]
        run_id = api.post(f"/api/experiments/{demo['id']}/launch/", {"overrides": QUICK})["id"]
        until("the run trains", lambda: run_row(tmp_path, run_id)["last_step"] >= 3, timeout=120)

        redis_pid, _ = child(proc.pid, "redis-server")
        before = run_row(tmp_path, run_id)["last_step"]
        os.kill(redis_pid, signal.SIGKILL)
        output.wait_for("redis is back on port", timeout=30)
        until("the run goes on after Redis came back",
              lambda: run_row(tmp_path, run_id)["last_step"] >= before + 3, timeout=120)  # fmt: skip
        assert run_row(tmp_path, run_id)["state"] == "running"

        at_stop = run_row(tmp_path, run_id)["last_step"]
        stopped = time.monotonic()
        stop(proc)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
    output.drain()
    run = run_row(tmp_path, run_id)
    assert (run["state"], run["restarts"]) == ("queued", 1), "".join(output.lines[-30:])
    [(from_step, lost, checkpoint, reason)] = rows(
        tmp_path, "SELECT from_step, steps_lost, checkpoint, reason FROM runs_runrestart WHERE run_id = ?", run_id
    )
    assert lost == 0 and from_step >= at_stop and Path(checkpoint).name == f"step-{from_step}"
    assert reason.startswith("interrupted: its worker shut down"), reason
    assert took < 60

    port = free_port()
    started = time.monotonic()
    proc, output = start_up(tmp_path, port)
    try:
        said = "".join(output.lines)
        assert "queued again (the broker keeps no messages across restarts):" in said, said
        assert re.search(rf"  run {run_id} '[^']+': resumes from {re.escape(checkpoint)}\n", said), said
        until("the resumed run ends", lambda: run_row(tmp_path, run_id)["state"] not in ("queued", "running"),
              timeout=180)  # fmt: skip
        assert run_row(tmp_path, run_id)["state"] == "succeeded"
        resumed_in = time.monotonic() - started
    finally:
        stop(proc)
    steps = rows(tmp_path, "SELECT step FROM runs_metricpoint WHERE run_id = ? AND key = 'reward/mean' ORDER BY step",
                 run_id)  # fmt: skip
    assert [step for (step,) in steps] == list(range(1, STEPS + 1))
    per_step = rows(tmp_path, "SELECT step, COUNT(*) FROM runs_rollout WHERE run_id = ? AND split = 'train' "
                    "GROUP BY step", run_id)  # fmt: skip
    assert len(per_step) == STEPS and len({count for _, count in per_step}) == 1
    print(f"\nredis SIGKILL: the run went on, no step lost; Ctrl-C at step {at_stop}: checkpoint at step {from_step}, "
          f"up gone in {took:.1f} s, steps lost {lost}; the next up finished it {resumed_in:.1f} s after it started")  # fmt: skip
