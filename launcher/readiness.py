"""When `up` may say the studio is up: the web port answers and each local worker answers a
Celery ping. Also the banner it then prints, and where each child's log goes.

Needs Django set up (the ping goes through the studio's Celery app and its broker).
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from launcher.processes import Children, port_open

WORKER_READY_TIMEOUT_S = 60.0  # a worker imports the studio and connects to the broker in a few seconds
PING_TIMEOUT_S = 1.0
LOG_TAIL_LINES = 20


@dataclass
class Readiness:
    """What came up: the web port, and which workers answered a ping (by node name)."""

    web: bool = False
    answered: set[str] = field(default_factory=set)
    waited_for: list[str] = field(default_factory=list)

    @property
    def silent(self) -> list[str]:
        return [name for name in self.waited_for if name not in self.answered]


def node_name(hostname: str) -> str:
    """A worker's node name as Celery expands it (`local@%h` -> `local@<this host>`)."""
    return hostname.replace("%h", socket.gethostname())


def wait_until_ready(host: str, port: int, workers: list[str], children: Children, stopping: threading.Event,
                     timeout: float = WORKER_READY_TIMEOUT_S) -> Readiness:  # fmt: skip
    """Wait for the web port, then for every worker in `workers` (node names) to answer a ping;
    gives up early when a child exits or Ctrl-C arrives, and after `timeout` seconds."""
    ready = Readiness(waited_for=list(workers))
    probe = "127.0.0.1" if host in ("0.0.0.0", "") else host
    deadline = time.monotonic() + timeout
    while not _should_give_up(children, stopping, deadline):
        ready.web = ready.web or port_open(probe, port)
        if ready.silent:
            ready.answered |= _ping(ready.silent)
        if ready.web and not ready.silent:
            break
        time.sleep(0.2)
    return ready


def _should_give_up(children: Children, stopping: threading.Event, deadline: float) -> bool:
    return stopping.is_set() or children.first_exited() is not None or time.monotonic() > deadline


def _ping(names: list[str]) -> set[str]:
    """The node names among `names` that answer a Celery control ping within PING_TIMEOUT_S."""
    from studio.celery import app

    replies = app.control.ping(destination=names, timeout=PING_TIMEOUT_S)
    return {name for reply in replies for name in reply}


def banner(url: str, ready: Readiness, login: tuple[str, str, Path] | None, login_file: Path, log_dir: Path) -> str:
    """The block `up` prints last: the address, the first login (or where it is kept), the
    workers (or which did not answer), and where the logs are."""
    lines = [f"Rollout Studio is up: {url}"]
    if login:
        lines.append(f"  first login: {login[0]} / {login[1]}  (also in {login[2]})")
    elif login_file.exists():
        lines.append(f"  first login: in {login_file}")
    if ready.silent:
        lines += [f"  worker {name} did not answer a ping in {WORKER_READY_TIMEOUT_S:.0f} s" for name in ready.silent]
    else:
        lines.append(f"  workers ready: {', '.join(ready.waited_for)}")
    lines.append(f"  logs: {log_dir}/ (web.log, worker.log, scorer.log)")
    lines.append("  Ctrl-C stops everything.")
    return "\n" + "\n".join(lines) + "\n"


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a child's log, to show why it exited."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(could not read {path}: {exc})"
