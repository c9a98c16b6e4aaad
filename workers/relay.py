"""The worker's end of a multi-process run's link (trainers.scale.remote): one TCP listener per run that
every rank connects to. Rank 0's reports are replayed into the run's DatabaseReporter (so they are
batched, persisted and published exactly as a one-process run's, once); the cancel check is turned
into a stop request to rank 0; and every rank is watched: a rank that says it failed, or whose
connection closes before it said it was done, is the run's failure, named.

Launcher-agnostic: workers.torchrun uses it for the processes of one machine; any launcher whose ranks
can reach the worker over TCP can bind it to such an address (`host`) and hand `env()` to its ranks
(workers.ray_launch carries its reports through a Ray actor instead). Everything runs on the caller's
thread (`pump`), so the reporter's database connection is the task's own.
"""

from __future__ import annotations

import logging
import secrets
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainers.report import Reporter, replay
from trainers.scale.remote import ADDRESS_ENV, TOKEN_ENV, decode, encode

log = logging.getLogger(__name__)

MAX_LINE = 256 * 2**20  # a step's rollouts of a big run fit many times over; more is not a report


@dataclass
class Rank:
    rank: int
    pid: int
    host: str
    done: dict[str, Any] | None = None  # rank's {status, detail, steps}, once it said so
    error: dict[str, Any] | None = None  # {type, message, detail, plain, traceback}, once it said so
    lost_at: float | None = None  # when its connection closed before it said either


@dataclass
class _Conn:
    sock: socket.socket
    buffer: bytearray = field(default_factory=bytearray)
    rank: Rank | None = None  # set by its hello


class Relay:
    """Listen (`env()` tells the ranks where), then `pump()` until the processes have ended."""

    def __init__(self, reporter: Reporter, should_stop: Callable[[], bool], world_size: int,
                 host: str = "127.0.0.1") -> None:  # fmt: skip
        self.reporter = reporter
        self.should_stop = should_stop
        self.world_size = world_size
        self.token = secrets.token_hex(16)
        self.listener = socket.create_server((host, 0))
        self.listener.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.ranks: dict[int, Rank] = {}
        self.failures: list[tuple[int, str]] = []  # (rank, why), first cause first (`_failed`)
        self._failure_keys: dict[int, tuple[int, int, int]] = {}
        self.rounds = 0  # pump rounds: events that one select returned together are simultaneous to us
        self.stop_sent_at: float | None = None
        self.conns: dict[int, _Conn] = {}  # by rank

    def env(self) -> dict[str, str]:
        host, port = self.listener.getsockname()[:2]
        return {ADDRESS_ENV: f"{host}:{port}", TOKEN_ENV: self.token}

    # --- what the launcher asks ---------------------------------------------------------------
    @property
    def result(self) -> dict[str, Any] | None:
        """Rank 0's {status, detail, steps}, once every rank has said it is done."""
        if len(self.ranks) == self.world_size and all(r.done for r in self.ranks.values()):
            return self.ranks[0].done
        return None

    @property
    def open_connections(self) -> int:
        return sum(1 for key in self.selector.get_map().values() if key.fileobj is not self.listener)

    def first_failure(self) -> tuple[int, str] | None:
        return self.failures[0] if self.failures else None

    def pump(self, timeout: float = 0.2) -> None:
        """Serve whatever arrived within `timeout`; ask rank 0 to stop once `should_stop()` says so."""
        self.rounds += 1
        for key, _ in self.selector.select(timeout):
            if key.fileobj is self.listener:
                self._accept()
            else:
                self._read(key.data)
        if self.stop_sent_at is None and self.should_stop():
            self.stop_sent_at = time.monotonic()
            self._send_stop()

    def drain(self, timeout: float) -> None:
        """After the processes ended: read what their connections still hold, up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self.open_connections and time.monotonic() < deadline:
            self.pump(0.1)

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            self.selector.unregister(key.fileobj)
            key.fileobj.close()
        self.selector.close()

    # --- connections --------------------------------------------------------------------------
    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        conn = _Conn(sock)
        self.selector.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._closed(conn)
            return
        conn.buffer += chunk
        while (end := conn.buffer.find(b"\n")) >= 0:
            line, conn.buffer = bytes(conn.buffer[:end]), conn.buffer[end + 1 :]
            if not self._handle(conn, line):
                self._closed(conn)
                return
        if len(conn.buffer) > MAX_LINE:
            self._drop(conn, "sent a line longer than the relay takes")
            self._closed(conn)

    def _handle(self, conn: _Conn, line: bytes) -> bool:
        """One message; False drops the connection (a stranger, or garbage)."""
        try:
            message = decode(line)
        except ValueError:
            self._drop(conn, "sent something that is not a JSON object")
            return False
        if conn.rank is None:
            return self._hello(conn, message)
        rank = conn.rank
        if "report" in message:
            if rank.rank != 0:  # only rank 0 reports; the others' Reporter is a NullReporter anyway
                return True
            try:
                replay(message["report"], self.reporter)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:  # not a report we know
                self._drop(conn, f"sent a report the relay cannot read ({type(exc).__name__}: {exc})")
                return False
        elif "done" in message:
            rank.done = dict(message["done"] or {})
        elif "error" in message:
            rank.error = dict(message["error"] or {})
            self._failed(rank, str(rank.error.get("detail", "")))
            if rank.rank != 0 and rank.error.get("traceback"):  # rank 0's trainer logged its own already
                self.reporter.log(f"rank {rank.rank}: {rank.error['traceback'].rstrip()}")
        return True

    def _hello(self, conn: _Conn, message: dict[str, Any]) -> bool:
        rank = message.get("rank")
        if not secrets.compare_digest(str(message.get("hello", "")), self.token) or not isinstance(rank, int):
            log.warning("the run's relay refused a connection that did not give the run's token")
            return False
        if rank in self.ranks or not 0 <= rank < self.world_size:
            log.warning("the run's relay refused a second or unknown rank %s", rank)
            return False
        conn.rank = self.ranks[rank] = Rank(rank, int(message.get("pid") or 0), str(message.get("host") or ""))
        self.conns[rank] = conn
        self.reporter.log(f"rank {rank} of {self.world_size} started: pid {conn.rank.pid} on {conn.rank.host}")
        if rank == 0 and self.stop_sent_at is not None:
            self._send_stop()
        return True

    def _closed(self, conn: _Conn) -> None:
        self.selector.unregister(conn.sock)
        conn.sock.close()
        rank = conn.rank
        if rank is not None and rank.done is None and rank.error is None:
            rank.lost_at = time.monotonic()
            self._failed(rank, "its process ended without finishing (killed, or crashed outside Python)", lost=True)

    def _drop(self, conn: _Conn, why: str) -> None:
        log.warning("the run's relay dropped a connection that %s", why)
        if conn.rank is not None:
            self._failed(conn.rank, f"it {why}")
            conn.rank.error = {"type": "ProtocolError", "message": why}

    def _failed(self, rank: Rank, why: str, lost: bool = False) -> None:
        """Note a rank's failure, first causes first: by the round it was seen in, and within one round
        a vanished process before a Python error (a rank's death makes its peers' collectives raise,
        and a select can return both at once; the reverse takes torchrun a monitor interval)."""
        if rank.rank in self._failure_keys:
            return
        self._failure_keys[rank.rank] = (self.rounds, 0 if lost else 1, len(self._failure_keys))
        self.failures.append((rank.rank, why))
        self.failures.sort(key=lambda failure: self._failure_keys[failure[0]])

    def _send_stop(self) -> None:
        conn = self.conns.get(0)
        if conn is None or conn.sock.fileno() < 0:
            return  # rank 0 has not connected yet: its hello gets the stop
        try:
            conn.sock.setblocking(True)
            conn.sock.sendall(encode({"stop": True}))
        except OSError:
            pass  # rank 0 is gone; watching the processes ends the run
        finally:
            if conn.sock.fileno() >= 0:
                conn.sock.setblocking(False)
