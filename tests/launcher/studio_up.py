"""A real `python -m launcher up` (what ./studioctl up runs) as a new user starts it, in a temp data
folder on a free port, for the tests of tests/launcher: its output line by line, and the processes
below it."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from launcher.processes import ROOT

PASSWORD = "up-password-123"
BANNER_END = "Ctrl-C stops everything."


def start_up(data_dir: Path, port: int, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, Output]:
    """`up` on `port` with its data in `data_dir` and its own embedded Redis (`env`: more variables),
    once it printed its banner."""
    env = {**os.environ, "STUDIO_DATA_DIR": str(data_dir), "STUDIO_ADMIN_PASSWORD": PASSWORD, "PYTHONUNBUFFERED": "1",
           **(env or {})}  # fmt: skip
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)  # the launcher starts its own embedded Redis, as for a new user
    proc = subprocess.Popen([sys.executable, "-m", "launcher", "up", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    output = Output(proc)
    output.wait_for(BANNER_END, timeout=180)
    return proc, output


def descendants(pid: int) -> dict[int, str]:
    """Every process below `pid` (children, their children...), by pid, with its command line."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # exited while we looked
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found[child] = command_line(child)
                frontier.append(child)
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def still_running(processes: dict[int, str]) -> dict[int, str]:
    """Those of `processes` (from `descendants`) that still run (the same pid with the same command line)."""
    return {pid: cmd for pid, cmd in processes.items() if command_line(pid) == cmd}


class Output:
    """The launcher's stdout and stderr, line by line, read in a thread."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self._queue.put(line) for line in proc.stdout], daemon=True).start()

    def wait_for(self, text: str, timeout: float) -> str:
        """The first line holding `text`, waiting for it up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not (found := [line for line in self.lines if text in line]):
            try:
                self.lines.append(self._queue.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                pytest.fail(f"no {text!r} in {timeout:.0f} s:\n" + "".join(self.lines[-40:]))
        return found[0]

    def drain(self) -> None:
        while not self._queue.empty():
            self.lines.append(self._queue.get_nowait())
