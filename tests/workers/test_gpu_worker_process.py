"""A real Celery worker process (prefork pool, real Redis broker, SQLite database) started the
way `./studioctl worker --queues gpu` starts it: it records itself in the fleet, pins each pool
process to its own GPU slot, and marks itself stopped on a warm shutdown."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from launcher.processes import Children, start_embedded_redis
from launcher.studio import worker_argv
from tests.migrated import migrate
from tests.passes import first_pass_only

pytestmark = first_pass_only

ROOT = Path(__file__).resolve().parents[2]


def wait_until(check, timeout: float, what: str, log: Path):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} after {timeout} s; worker log:\n{log.read_text()[-3000:]}")


def fleet_row(db: Path):
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute(
                "SELECT hostname, queues, gpus, concurrency, stopped, last_seen FROM fleet_workernode"
            ).fetchone()
    except sqlite3.OperationalError:  # table not there yet / locked by a writer
        return None


@pytest.mark.timeout(120)
def test_a_gpu_worker_reports_itself_pins_its_pool_and_says_when_it_stops(tmp_path):
    children = Children()
    redis_url = start_embedded_redis(children, tmp_path)  # the launcher's own start-up
    db = tmp_path / "studio.sqlite3"
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="studio.settings",
        STUDIO_DATA_DIR=str(tmp_path),
        DATABASE_URL=f"sqlite:///{db}",
        REDIS_URL=redis_url,
        CUDA_VISIBLE_DEVICES="0,1",  # two GPU slots; harmless on a machine without GPUs
        STUDIO_HEARTBEAT_INTERVAL_S="0.5",
        PYTHONUNBUFFERED="1",
    )
    log = tmp_path / "worker.log"
    worker = None
    try:
        migrate(env)
        worker = subprocess.Popen(
            worker_argv("gpu", 2, "gpu-test@%h"), cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
        )
        hostname, queues, gpus, concurrency, stopped, first_seen = wait_until(
            lambda: fleet_row(db), 60, "no fleet row", log
        )
        assert hostname == f"gpu-test@{socket.gethostname()}"
        assert (json.loads(queues), concurrency, stopped) == (["gpu"], 2, None)
        assert json.loads(gpus) == []  # no nvidia-smi here; a GPU machine lists its GPUs
        wait_until(
            lambda: (
                "pool process 0 runs on GPU 0" in log.read_text() and "pool process 1 runs on GPU 1" in log.read_text()
            ),
            30,
            "pool processes not pinned",
            log,
        )
        wait_until(lambda: fleet_row(db)[5] > first_seen, 30, "no heartbeat", log)
        worker.send_signal(signal.SIGTERM)  # warm shutdown, as the launcher stops it
        worker.wait(30)
        assert fleet_row(db)[4] is not None, log.read_text()[-3000:]
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
        children.stop_all()
