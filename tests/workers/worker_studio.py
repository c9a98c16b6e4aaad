"""A studio for tests that run a real Celery worker process (prefork pool, the embedded Redis broker, a
SQLite file), started the way `./studioctl worker --queues gpu` starts it. The test process's own Django
database is pytest's, not the worker's: user actions go through tests/workers/studio_actions.py in a
child process, and the test reads the worker's database file with sqlite3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from launcher.processes import ROOT, Children, start_embedded_redis
from launcher.studio import worker_argv
from tests.migrated import migrate

RUN_COLUMNS = ("state", "error", "last_step", "placement", "started", "finished", "heartbeat")


class Studio:
    def __init__(self, folder: Path, env: dict[str, str], log: Path, overrides: dict[str, Any]) -> None:
        self.folder, self.env, self.log, self.overrides = folder, env, log, overrides
        self.db = folder / "studio.sqlite3"
        self.workers: list[subprocess.Popen] = []

    def start_worker(self, hostname: str) -> subprocess.Popen:
        """A worker process on the gpu queue (one pool process), its output appended to the log."""
        with self.log.open("a") as out:
            worker = subprocess.Popen(worker_argv("gpu", 1, hostname), cwd=ROOT, env=self.env, stdout=out,
                                      stderr=subprocess.STDOUT)  # fmt: skip
        self.workers.append(worker)
        return worker

    def act(self, *args: str) -> str:
        """A studio action (tests/workers/studio_actions.py) against this studio's database."""
        done = subprocess.run([sys.executable, "-m", "tests.workers.studio_actions", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip().splitlines()[-1]

    def launch(self, total_steps: int) -> int:
        """The demo experiment launched with this studio's overrides and `total_steps`; its run id."""
        overrides = {**self.overrides, "optim": {**self.overrides.get("optim", {}), "total_steps": total_steps}}
        return int(self.act("launch", json.dumps(overrides)))

    def query(self, sql: str, *args) -> list[tuple]:
        import sqlite3

        with sqlite3.connect(self.db, timeout=30) as conn:
            return conn.execute(sql, args).fetchall()

    def run(self, run_id: int) -> dict:
        [row] = self.query(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs_run WHERE id = ?", run_id)
        return dict(zip(RUN_COLUMNS, row, strict=True))

    def metric_steps(self, run_id: int) -> list[int]:
        rows = self.query("SELECT step FROM runs_metricpoint WHERE run_id = ? AND key = 'reward/mean' ORDER BY step",
                          run_id)  # fmt: skip
        return [step for (step,) in rows]

    def log_lines(self, run_id: int) -> list[str]:
        rows = self.query("SELECT payload FROM runs_runevent WHERE run_id = ? AND kind = 'log' ORDER BY seq", run_id)
        return [json.loads(payload)["line"] for (payload,) in rows]

    def wait(self, check, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value := check():
                return value
            time.sleep(0.25)
        raise AssertionError(f"{what} after {timeout} s; worker log:\n{self.log.read_text()[-4000:]}")

    def wait_until_finished(self, run_id: int, timeout: float) -> dict:
        return self.wait(lambda: (r := self.run(run_id))["state"] in ("succeeded", "failed", "cancelled") and r,
                         timeout, f"run {run_id} not finished")  # fmt: skip


@contextmanager
def studio_with_worker(folder: Path, hostname: str, overrides: dict[str, Any],
                       env: dict[str, str] | None = None) -> Iterator[Studio]:  # fmt: skip
    """A migrated SQLite studio in `folder` with one worker process (`hostname`) on the gpu queue, and
    `env` added to its environment; stopped on exit."""
    children = Children()
    dropped = ("CUDA_VISIBLE_DEVICES", "DATABASE_URL", "RAY_ADDRESS")
    full_env = {k: v for k, v in os.environ.items() if k not in dropped}
    full_env.update(DJANGO_SETTINGS_MODULE="studio.settings", STUDIO_DATA_DIR=str(folder), PYTHONUNBUFFERED="1",
                    DATABASE_URL=f"sqlite:///{folder / 'studio.sqlite3'}",
                    REDIS_URL=start_embedded_redis(children, folder), **(env or {}))  # fmt: skip
    studio = Studio(folder, full_env, folder / "worker.log", overrides)
    try:
        migrate(full_env)
        studio.start_worker(hostname)
        yield studio
    finally:
        for worker in studio.workers:
            if worker.poll() is None:
                worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        children.stop_all()


def gone(pids) -> bool:
    """None of `pids` is a live process (a zombie counts as gone)."""
    return not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
