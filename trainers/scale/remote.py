"""A run whose processes another program started (the studio's worker, through torchrun or Ray):
each rank connects back to that program's relay, rank 0 streams its reports over the connection,
and the relay's stop request reaches rank 0.

Why a socket to the launching program, and not the database from rank 0: the ranks stay plain trainer
processes (no Django, no database credentials in a process that runs user reward code), the one task
that holds the run's GPUs stays the one writer of the run's rows (its Reporter batches them exactly
as for a one-process run, and nothing is written twice), and a TCP connection can reach the relay from
ranks on other machines, where no pipe can (the Ray launcher, workers.ray_launch, has Ray's own
channels and uses those). Rank 0's stdout would be no better a pipe: it mixes with torchrun's, the
libraries' and the other ranks' output.

Every rank connects, not only rank 0, so the relay watches each one: a rank's connection that closes
without a `done` or an `error` is a rank that died (killed, or crashed outside Python), seen the moment
the kernel closes its socket.

The wire: JSON lines over TCP.
- rank → relay, first line: {"hello": token, "rank": r, "pid": p, "host": h}; the token (given in the
  environment, which only the same user can read; argv is public) keeps other local users out.
- rank 0 → relay: {"report": event}, one per Reporter call (`trainers.report.EventReporter`, `replay`).
- any rank → relay, at its end: {"done": {status, detail, steps}} or {"error": {type, message, traceback}}.
- relay → rank 0: {"stop": true}. A closed connection also stops a rank: nobody records the run any more.

Run as `python -m trainers.scale.remote SPEC.json` under torchrun, with ADDRESS_ENV and TOKEN_ENV set.
The entry point is wrapped in torch elastic's `record`, so a rank that raises also leaves its traceback
in TORCHELASTIC_ERROR_FILE, and torchrun's summary names it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainers.report import EventReporter, NullReporter, PlainFailure, failure_detail
from trainers.spec import RunSpec

ADDRESS_ENV = "ROLLOUT_RELAY"  # host:port of the relay
TOKEN_ENV = "ROLLOUT_RELAY_TOKEN"
CONNECT_TIMEOUT_S = 30.0


def _plain(value: Any) -> Any:
    """What json cannot write itself: numpy and torch scalars (`item`), paths, anything else as text."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, default=_plain).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError(f"expected a JSON object, got {type(message).__name__}")
    return message


class Link:
    """This rank's connection to the relay: sends messages, and notes a stop request (or the relay
    going away) for `should_stop`."""

    def __init__(self, sock: socket.socket, rank: int) -> None:
        self.sock = sock
        self.rank = rank
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.broken = False
        threading.Thread(target=self._listen, name="relay-link", daemon=True).start()

    @classmethod
    def connect(cls, address: str, token: str, rank: int) -> Link:
        host, _, port = address.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S)
        sock.settimeout(None)
        link = cls(sock, rank)
        link.send({"hello": token, "rank": rank, "pid": os.getpid(), "host": socket.gethostname()})
        return link

    def send(self, message: dict[str, Any]) -> None:
        """Send one message; once the relay is gone, messages are dropped and the rank is asked to
        stop (raising here would turn a studio restart into a traceback in every rank)."""
        if self.broken:
            return
        try:
            with self.lock:
                self.sock.sendall(encode(message))
        except OSError:
            self.broken = True
            self.stop.set()

    def should_stop(self) -> bool:
        return self.stop.is_set()

    def _listen(self) -> None:
        try:
            for line in self.sock.makefile("rb"):
                if decode(line).get("stop"):
                    self.stop.set()
        except (OSError, ValueError):
            pass
        self.stop.set()  # the relay closed the connection: nobody records this run any more

    def done(self, result: Any) -> None:
        self.send({"done": {"status": result.status, "detail": getattr(result, "detail", ""),
                            "steps": getattr(result, "steps", 0)}})  # fmt: skip

    def error(self, exc: BaseException) -> None:
        """`detail`: what the run's status would say of it in one process (`failure_detail`); `plain`: that is
        the run's error as it stands (a PlainFailure: one line saying what to do)."""
        self.send({"error": {"type": type(exc).__name__, "message": str(exc), "detail": failure_detail(exc),
                             "plain": isinstance(exc, PlainFailure), "traceback": traceback.format_exc()}})  # fmt: skip

    def close(self) -> None:
        with contextlib.suppress(OSError):  # already closed by the relay
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def reporter_over(link: Link) -> EventReporter:
    """The Reporter rank 0 trains with: every call becomes a {"report": event} message to the relay."""
    return EventReporter(lambda event: link.send({"report": event}))


def run_rank(spec_path: str) -> int:
    """Train this rank's part of the run in `spec_path` (a RunSpec as JSON), linked to the relay."""
    from trainers.run.loop import train  # (torch, transformers)
    from trainers.scale.distributed import dist_info  # (torch) the relay side imports this module too

    info = dist_info()
    link = Link.connect(os.environ[ADDRESS_ENV], os.environ[TOKEN_ENV], info.rank)
    try:
        spec = RunSpec.model_validate_json(Path(spec_path).read_text())
        result = train(spec, reporter_over(link) if info.is_main else NullReporter(), link.should_stop)
    except BaseException as exc:
        link.error(exc)
        raise
    link.done(result)
    link.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m trainers.scale.remote SPEC.json (under torchrun, with the relay in the environment)",
              file=sys.stderr)  # fmt: skip
        return 2
    from torch.distributed.elastic.multiprocessing.errors import record  # (torch) only where a rank runs

    return record(run_rank)(args[0])


if __name__ == "__main__":
    sys.exit(main())
