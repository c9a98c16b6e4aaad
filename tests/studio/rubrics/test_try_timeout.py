"""When "try it" gets no answer in time, the message says why, truthfully: a criterion still
running on a real worker is named; with no worker on the scoring queue, that is what it says.

A real Celery worker (started as `./studioctl worker --queues default` starts it) on the
launcher's embedded Redis and a SQLite database; the studio side runs in a process of its own
configured for that Redis, as the web tier is.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.processes import Children, start_embedded_redis
from launcher.studio import worker_argv
from tests.migrated import migrate
from tests.passes import first_pass_only

ROOT = Path(__file__).resolve().parents[3]
pytestmark = first_pass_only  # its worker's studio is a SQLite file and a Redis of its own
HANGS = "def score(prompt, completion, **f):\n    while True:\n        pass\n"

# Tried for 3 s: a rubric whose python criterion hangs (its own limit is 8 s).
SPEC = {"criteria": [{"name": "fast", "kind": "length"},
                     {"name": "mine", "kind": "python", "params": {"code": HANGS, "timeout_s": 8}}]}  # fmt: skip
# The web tier's side, in a process configured for the worker's Redis and database.
TRY_IT = """
import json, sys, time, django
django.setup()
from studio.rubrics.scoring import TryError, try_rubric
started = time.monotonic()
try:
    try_rubric(json.loads(sys.argv[1]), [{"prompt": "p", "completion": "c"}], timeout_s=3)
    print(json.dumps({"answered": True}))
except TryError as exc:
    print(json.dumps({"status": exc.status, "detail": exc.errors["detail"], "s": time.monotonic() - started}))
"""


def worker_online(db: Path) -> bool:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM fleet_workernode WHERE stopped IS NULL").fetchone()[0] > 0
    except sqlite3.OperationalError:  # not migrated yet / locked by a writer
        return False


def try_it(env: dict[str, str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", TRY_IT, json.dumps(SPEC)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(180)
def test_a_timed_out_try_names_the_running_criterion_or_says_no_worker_serves_the_queue(tmp_path):
    children = Children()
    redis_url = start_embedded_redis(children, tmp_path)
    db = tmp_path / "studio.sqlite3"
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="studio.settings", STUDIO_DATA_DIR=str(tmp_path),
               DATABASE_URL=f"sqlite:///{db}", REDIS_URL=redis_url, PYTHONUNBUFFERED="1")  # fmt: skip
    log = tmp_path / "worker.log"
    worker = None
    try:
        migrate(env)
        worker = subprocess.Popen(worker_argv("default", 1, "default-test@%h"), cwd=ROOT, env=env,
                                  stdout=log.open("w"), stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 60
        while not worker_online(db):
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)

        busy = try_it(env)
        assert busy["status"] == 504, busy
        assert busy["detail"].startswith("criterion 'mine' (python) was still running on 1 pair after 3 s"), busy
        assert "no worker" not in busy["detail"]
        assert busy["s"] < 15

        # A clean stop marks it stopped in the fleet (once the hanging call has met its own limit).
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
        idle = try_it(env)
        assert idle["status"] == 504, idle
        assert "no worker answered within 3 s: none serving the 'default' queue is running" in idle["detail"], idle
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
        children.stop_all()
