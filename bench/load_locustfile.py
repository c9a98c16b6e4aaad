"""Locust users for bench/load_studio.py: people with a run page open (it starts them; not on its own).

Each simulated user is one person in a browser: opens a run's page as the browser does (the HTML, then
the curves, the first page of rollouts and the notes), keeps the page's websocket open the whole time
(a greenlet reads it, as ws.js does), and meanwhile works in the inspector (a filtered page of
rollouts, one rollout with its group), now and then writes a note on a rollout, and sometimes moves on
to another run (its websocket closes, the new page opens another).

Every `metrics` message that arrives on a held websocket is reported to Locust as a request of type WS
named "live update", its time the delay from the writer's `bench/sent_at` to its arrival: the live
latency under load, in the same table as the endpoints.

BENCH_LOAD_CONFIG names a JSON file: {"runs": [ids], "session": session key, "token": API token}.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
from pathlib import Path

import gevent
import websocket
from locust import HttpUser, between, events, task

CONFIG = json.loads(Path(os.environ["BENCH_LOAD_CONFIG"]).read_text())
OPEN: set = set()  # every held socket, so the end of the test can end them (a blocked reader keeps Locust up)
FILTERS = [{}, {"min_reward": "0.5"}, {"max_reward": "0.5"}, {"sort": "-reward"}, {"finish_reason": "eos"}]


class Person(HttpUser):
    wait_time = between(1, 4)  # a person reading a page between clicks

    def on_start(self) -> None:
        self.client.cookies.set("sessionid", CONFIG["session"])
        self.api: dict[str, str] = {}  # the browser's calls: its session cookie, and the CSRF token on a write
        self.ws: websocket.WebSocket | None = None
        self.reader = None
        self.rollout_ids: list[int] = []
        self.open_run(random.choice(CONFIG["runs"]))

    def on_stop(self) -> None:
        self.close_socket()

    # --- the run page -------------------------------------------------------------------
    def open_run(self, run_id: int) -> None:
        self.close_socket()
        self.run_id = run_id
        self.client.get(f"/runs/{run_id}/", name="page /runs/<id>/")
        curves = self.client.get(f"/api/runs/{run_id}/metrics/", headers=self.api, name="/api/runs/<id>/metrics/")
        try:
            cursor = int(curves.json().get("cursor") or 0)  # the page follows the socket from the curves' cursor
        except Exception:  # noqa: BLE001 - a failed request was reported already
            cursor = 0
        page = self.client.get(f"/api/runs/{run_id}/rollouts/", params={"limit": 50}, headers=self.api,
                               name="/api/runs/<id>/rollouts/")  # fmt: skip
        self.rollout_ids = self._ids(page)
        self.client.get(f"/api/runs/{run_id}/notes/", headers=self.api, name="/api/runs/<id>/notes/")
        self.open_socket(run_id, cursor)

    def open_socket(self, run_id: int, cursor: int) -> None:
        host = self.host.removeprefix("http://")
        started = time.perf_counter()
        try:
            ws = websocket.create_connection(
                f"ws://{host}/ws/runs/{run_id}/?after={cursor}", timeout=60, origin=self.host,
                cookie=f"sessionid={CONFIG['session']}",
            )  # fmt: skip
            hello = json.loads(ws.recv())
            if hello.get("kind") != "hello":
                raise RuntimeError(f"first message {hello.get('kind')!r}, not hello")
        except Exception as exc:  # noqa: BLE001 - reported to Locust as the connect's failure
            fire("WS", "connect", started, exc)
            return
        fire("WS", "connect", started)
        self.ws = ws
        OPEN.add(ws)
        self.reader = gevent.spawn(self.read, ws)

    def read(self, ws: websocket.WebSocket) -> None:
        """Every message until the socket closes; a metrics message's delay is reported as "live update"."""
        ws.settimeout(None)
        while True:
            try:
                raw = ws.recv()
            except Exception as exc:  # noqa: BLE001 - ours closed it (moving on) or the server dropped it
                if self.ws is ws:
                    fire("WS", "dropped", time.perf_counter(), exc)
                return
            received = time.time()
            if not raw:
                continue
            event = json.loads(raw)
            sent = (
                event.get("data", {}).get("values", {}).get("bench/sent_at") if event.get("kind") == "metrics" else None
            )
            if sent is not None and event.get("step", 0) > CONFIG.get("history", 0):
                # Live steps only: the history was written as fast as it went, not at the steady rate.
                events.request.fire(request_type="WS", name="live update", response_time=(received - sent) * 1000,
                                    response_length=len(raw), exception=None, context={})  # fmt: skip

    def close_socket(self) -> None:
        ws, self.ws = self.ws, None
        if self.reader is not None:  # first: two greenlets must not read one socket (close waits for a reply)
            self.reader.kill(block=True, timeout=2)
            self.reader = None
        if ws is not None:
            OPEN.discard(ws)
            with contextlib.suppress(Exception):  # it is going anyway
                ws.shutdown()  # no closing handshake to wait for: the server sees the socket end

    @staticmethod
    def _ids(response) -> list[int]:
        try:
            return [row["id"] for row in response.json()["results"]]
        except Exception:  # noqa: BLE001 - a failed page was reported already
            return []

    # --- what the person does with the page open --------------------------------------------
    @task(6)
    def inspect(self) -> None:
        params = {"limit": 50, **random.choice(FILTERS)}
        page = self.client.get(f"/api/runs/{self.run_id}/rollouts/", params=params, headers=self.api,
                               name="/api/runs/<id>/rollouts/?filter")  # fmt: skip
        self.rollout_ids = self._ids(page) or self.rollout_ids
        if self.rollout_ids:
            rollout = random.choice(self.rollout_ids)
            self.client.get(f"/api/runs/{self.run_id}/rollouts/{rollout}/", headers=self.api,
                            name="/api/runs/<id>/rollouts/<rid>/")  # fmt: skip

    @task(2)
    def zoom_curves(self) -> None:
        self.client.get(f"/api/runs/{self.run_id}/metrics/", params={"start": 1, "end": 100}, headers=self.api,
                        name="/api/runs/<id>/metrics/?zoom")  # fmt: skip

    @task(1)
    def write_note(self) -> None:
        if not self.rollout_ids:
            return
        body = {"text": "looks like reward hacking here", "tag": "reward hacking",
                "rollout": random.choice(self.rollout_ids)}  # fmt: skip
        csrf = {"X-CSRFToken": self.client.cookies.get("csrftoken", "")}  # as api.js sends it
        self.client.post(f"/api/runs/{self.run_id}/notes/", json=body, headers=csrf, name="POST /api/runs/<id>/notes/")

    @task(1)
    def run_list(self) -> None:
        self.client.get("/api/runs/", headers=self.api, name="/api/runs/")

    @task(1)
    def another_run(self) -> None:
        self.open_run(random.choice(CONFIG["runs"]))


def fire(kind: str, name: str, started: float, exc: BaseException | None = None) -> None:
    events.request.fire(request_type=kind, name=name, response_time=(time.perf_counter() - started) * 1000,
                        response_length=0, exception=exc, context={})  # fmt: skip


@events.test_stop.add_listener
def _close_every_socket(**_) -> None:
    for ws in list(OPEN):
        with contextlib.suppress(Exception):
            ws.shutdown()
    OPEN.clear()
