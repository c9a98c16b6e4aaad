"""A run page's websocket through an outage of the channel layer's Redis, with the real parts: daphne
serving the studio (tests/browser/live_studio.py), the launcher's embedded redis-server, killed and
started again on its port (empty, as an embedded Redis always restarts), a stand-in worker process
that records events as a worker does (outage_feeder.py), and a websocket client that does what
frontend/static/js/ws.js does: keep its cursor, and reconnect with `after=<cursor>` when closed.

The studio here is always its own SQLite file and its own Redis (the shared Redis of the team-scale
pass must not be killed), so the team-scale pass would run the same test again: it is skipped there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import connect

from launcher.processes import start_embedded_redis
from studio.runs.live.consumers import CLOSE_LAYER_LOST
from tests.browser.live_studio import LiveStudio

ROOT = Path(__file__).resolve().parents[4]
REJOIN_S = 1.0  # the studio's LIVE_REJOIN_S here (30 s by default), so the tests take seconds

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="its studio is its own SQLite file and embedded Redis in either pass; run once, in the first",
    ),
]


class Feeder:
    """outage_feeder.py: a worker's way of recording events, in a process of its own."""

    def __init__(self, studio: LiveStudio) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("outage_feeder.py"))], cwd=ROOT,
                                     env=studio.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=(studio.folder / "feeder.log").open("w"), text=True)  # fmt: skip
        self.token = json.loads(self.ask(""))["token"]

    def ask(self, command: str) -> str:
        if command:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the feeder died; see feeder.log"
        return line.strip()

    def new_run(self) -> int:
        return int(self.ask("run"))

    def record(self, run_id: int, count: int) -> int:
        """Record `count` log events; returns the run's last seq."""
        return int(self.ask(f"record {run_id} {count}"))

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


class PageSocket:
    """The run page's websocket client (ws.js): the cursor is the last seq seen; a closed socket is
    opened again with `after=<cursor>`, retried every half second until it opens."""

    def __init__(self, studio: LiveStudio, run_id: int, token: str) -> None:
        self.studio, self.run_id, self.token = studio, run_id, token
        self.cursor = 0
        self.seqs: list[int] = []  # every stored event received, in order
        self.closes: list[int | None] = []  # close codes the server sent (None: refused at the handshake)
        self.sockets = contextlib.ExitStack()
        self.ws = None
        self.open()

    def open(self, timeout: float = 60) -> None:
        url = f"ws://127.0.0.1:{self.studio.port}/ws/runs/{self.run_id}/?after={self.cursor}&token={self.token}"
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.ws = self.sockets.enter_context(
                    connect(url, additional_headers={"Origin": self.studio.base_url}, open_timeout=5)
                )
                hello = json.loads(self.ws.recv(timeout=10))
                assert hello["kind"] == "hello", hello
                return
            except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed) as exc:
                self.closes.append(exc.rcvd.code if isinstance(exc, ConnectionClosed) and exc.rcvd else None)
                if time.monotonic() > deadline:
                    raise AssertionError(f"no websocket after {timeout} s:\n{self.studio.logs()}") from exc
                time.sleep(0.5)

    def receive_until(self, seq: int, timeout: float) -> list[int]:
        """Events until the cursor reaches `seq`, reconnecting when the server closes the socket."""
        deadline = time.monotonic() + timeout
        while self.cursor < seq:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the page saw {self.seqs} (closes {self.closes}), not up to seq {seq} in "
                                     f"{timeout} s:\n{self.studio.logs()}")  # fmt: skip
            try:
                message = json.loads(self.ws.recv(timeout=min(1.0, left)))
            except TimeoutError:
                continue
            except ConnectionClosed as exc:
                self.closes.append(exc.rcvd.code if exc.rcvd else None)
                self.open()
                continue
            if "seq" in message:
                self.seqs.append(message["seq"])  # one the server sends twice shows as a repeat here
                self.cursor = max(self.cursor, message["seq"])
        return self.seqs

    def close(self) -> None:
        self.sockets.close()


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("STUDIO_LIVE_REJOIN_S", str(REJOIN_S))
        live = LiveStudio(tmp_path_factory.mktemp("broker-outage")).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def feeder(studio):
    feeder = Feeder(studio)
    yield feeder
    feeder.stop()


def restart_redis(studio: LiveStudio, down_s: float) -> None:
    """Kill the studio's redis-server (SIGKILL: no goodbye to its clients) and start a new, empty
    one on the same port after `down_s` seconds."""
    port = studio.env["REDIS_URL"].rsplit(":", 1)[1].split("/")[0]
    studio.children.stop("redis", signal.SIGKILL)
    time.sleep(down_s)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("STUDIO_REDIS_PORT", port)
        assert start_embedded_redis(studio.children, studio.folder) == studio.env["REDIS_URL"]


def test_a_page_open_through_a_redis_restart_gets_every_event_once(studio, feeder):
    """Redis dies and comes back empty (every group membership gone) while the page is open, and the
    run records events meanwhile: the server closes the socket (4503) instead of leaving it open and
    deaf, the page reconnects from its cursor once Redis answers, and sees every event exactly once."""
    run_id = feeder.new_run()
    page = PageSocket(studio, run_id, feeder.token)
    try:
        assert page.receive_until(feeder.record(run_id, 3), timeout=10) == [1, 2, 3]
        restart_redis(studio, down_s=2.0)  # the worker goes on recording while Redis is away
        feeder.record(run_id, 3)
        last = feeder.record(run_id, 3)
        assert last == 9
        assert page.receive_until(last, timeout=60) == list(range(1, 10))
        assert CLOSE_LAYER_LOST in page.closes, page.closes
        # and live again on the new Redis
        assert page.receive_until(feeder.record(run_id, 2), timeout=10) == list(range(1, 12))
    finally:
        page.close()


def test_a_page_whose_group_membership_vanished_hears_the_run_again_without_reconnecting(studio, feeder):
    """The memberships vanish while every connection stays up: what a Redis restarted empty between
    two of daphne's reads leaves, or a failover to a replica without them, or channels_redis' group
    expiry (a day) on a page left open. Those are not made on purpose here; FLUSHALL empties Redis
    the same way. The consumer joins its groups again every LIVE_REJOIN_S and reads what it missed
    from the database, so the page hears the run again with every event once."""
    run_id = feeder.new_run()
    page = PageSocket(studio, run_id, feeder.token)
    try:
        assert page.receive_until(feeder.record(run_id, 2), timeout=10) == [1, 2]
        redis.Redis.from_url(studio.env["REDIS_URL"]).flushall()
        last = feeder.record(run_id, 3)  # published to a group that has no member now
        assert page.receive_until(last, timeout=5 * REJOIN_S + 5) == [1, 2, 3, 4, 5]
        assert page.receive_until(feeder.record(run_id, 2), timeout=10) == list(range(1, 8))
        assert page.closes == []  # the same socket throughout
    finally:
        page.close()
