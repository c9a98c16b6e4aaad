"""`up` supervises its children once the studio is up: a child that dies is started again (after a
1 s back-off), and the studio keeps working. Killed with SIGKILL, the embedded Redis comes back on
the same port, empty: the web server and both workers work against it again, and `up` sends the
lost tasks again (a dataset check here). A killed worker is started again too, and what it left in
its session is killed. Ctrl-C still leaves no process behind, giving the run worker
STUDIO_STOP_GRACE_S."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from celery import Celery
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from launcher.processes import free_port, port_open
from launcher.readiness import node_name
from launcher.studio import LOCAL_SCORER, LOCAL_WORKER
from tests.launcher.studio_up import descendants, start_up, still_running

BACK_WITHIN_S = 30.0  # Redis back after its 1 s back-off, then the workers' reconnect (Celery waits 2 s, then 4 s...)
CLOSE_DENIED = 4403  # studio.runs.live.consumers: the socket joined its groups in Redis, then was refused


def until(what: str, check: Callable[[], object], timeout: float = BACK_WITHIN_S) -> float:
    """Wait until `check()` is true (checked every 0.2 s), and return time.monotonic() then; fails
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.2)
    return time.monotonic()


def child(up_pid: int, marker: str) -> tuple[int, str]:
    """The pid and command line of `up`'s own child whose command line holds `marker`."""
    for pid, cmd in descendants(up_pid).items():
        if marker in cmd and _parent(pid) == up_pid:
            return pid, cmd
    raise AssertionError(f"no child of up with {marker!r}: {descendants(up_pid)}")


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def answering(app: Celery, names: list[str]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            replies = app.control.ping(destination=names, timeout=1.0)
        except Exception:  # noqa: BLE001 - the broker is not back yet
            return False
        return {name for reply in replies for name in reply} == set(names)

    return check


def web_answers(port: int) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/login/", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    return check


def channel_layer_answers(port: int) -> Callable[[], bool]:
    """A new run-page websocket joins its groups in Redis before the access check refuses it."""

    def check() -> bool:
        try:
            with connect(f"ws://127.0.0.1:{port}/ws/runs/1/", open_timeout=5) as ws:
                ws.recv(timeout=5)
        except ConnectionClosed as exc:
            return exc.rcvd is not None and exc.rcvd.code == CLOSE_DENIED
        except (OSError, TimeoutError):
            return False
        return False

    return check


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_up_starts_again_a_child_that_dies_and_the_studio_keeps_working(tmp_path):
    port = free_port()
    proc, output = start_up(tmp_path, port, env={"STUDIO_STOP_GRACE_S": "45"})
    seen = descendants(proc.pid)
    workers = [node_name(LOCAL_WORKER), node_name(LOCAL_SCORER)]
    try:
        redis_pid, redis_cmd = child(proc.pid, "redis-server")
        redis_port = int(re.search(r"127\.0\.0\.1:(\d+)", redis_cmd)[1])  # its title: redis-server host:port
        broker = Celery(broker=f"redis://127.0.0.1:{redis_port}/0")
        assert answering(broker, workers)()
        # A dataset whose check message is lost with Redis's data: the first start's demo dataset, set
        # back to `checking` (in the studio's SQLite file) without a message, as if Redis died with it.
        with sqlite3.connect(tmp_path / "studio.sqlite3", timeout=30) as db:
            dataset = db.execute("SELECT min(id) FROM datasets_dataset").fetchone()[0]
            db.execute("UPDATE datasets_dataset SET status = 'checking' WHERE id = ?", (dataset,))

        killed = time.monotonic()
        os.kill(redis_pid, signal.SIGKILL)
        output.wait_for("redis exited with code -9; starting it again in 1 s (restart 1)", timeout=10)
        back = {"redis": until("Redis answers on its port", lambda: port_open("127.0.0.1", redis_port))}
        new_redis_pid, new_redis_cmd = child(proc.pid, "redis-server")
        assert new_redis_pid != redis_pid and new_redis_cmd == redis_cmd  # the same port
        back["web"] = until("the login page answers", web_answers(port))
        back["channel layer"] = until("a websocket joins its groups", channel_layer_answers(port))
        back["workers"] = until("both workers answer a ping", answering(broker, workers))
        output.wait_for(f"checks sent again: datasets [{dataset}]", timeout=10)
        back["check"] = until("the lost check was done", lambda: _status(tmp_path, dataset) == "ready")
        print("after the SIGKILL of redis:", ", ".join(f"{what} {at - killed:.1f} s" for what, at in back.items()))
        assert "redis exited with code -9" in (tmp_path / "redis" / "redis.log").read_text()
        assert proc.poll() is None

        seen |= descendants(proc.pid)
        scorer_pid, _ = child(proc.pid, "local-score@")
        scorer_group = {pid: cmd for pid, cmd in seen.items() if _group(pid) == scorer_pid}
        assert len(scorer_group) >= 2, seen  # its main process and its pool process
        killed = time.monotonic()
        os.kill(scorer_pid, signal.SIGKILL)
        output.wait_for("scorer exited with code -9; starting it again in 1 s (restart 1)", timeout=10)
        until("the killed scorer's pool process is gone", lambda: not still_running(scorer_group), timeout=10)
        again = until("the scorer answers a ping again", answering(broker, [node_name(LOCAL_SCORER)]), timeout=60)
        print(f"after the SIGKILL of the scorer: it answers a ping again {again - killed:.1f} s")
        assert child(proc.pid, "local-score@")[0] != scorer_pid
        assert "scorer exited with code -9" in (tmp_path / "logs" / "scorer.log").read_text()
        assert proc.poll() is None
        broker.close()
    finally:
        seen |= descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(90) == 0
        left = still_running(seen)
        assert not left, left
    output.wait_for("stopping: workers (running runs save a checkpoint first; up to 45 s)", timeout=5)


def _group(pid: int) -> int | None:
    """The process group of `pid` (what launcher.processes signals), None once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _status(data_dir: Path, dataset: int) -> str:
    with sqlite3.connect(data_dir / "studio.sqlite3", timeout=30) as db:
        return db.execute("SELECT status FROM datasets_dataset WHERE id = ?", (dataset,)).fetchone()[0]
