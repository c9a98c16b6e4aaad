"""The processes of one run on one machine, started with torchrun under the Celery task that leased
their GPUs (studio.fleet.leases): `python -m torch.distributed.run --standalone -m trainers.scale.remote`,
CUDA_VISIBLE_DEVICES set to the leased GPUs (on a machine without GPUs: CPU processes on gloo).

Reports come back over the run's relay (workers.relay; why a socket, in trainers.scale.remote), so the
task's DatabaseReporter writes them as for a one-process run. Every rank is watched twice: the relay
sees a rank fail or vanish the moment it happens, and torchrun's own agent (which stops the other
ranks when one fails) writes each failed rank's exit code and, through `record` on the entry point,
its traceback (TORCHELASTIC_ERROR_FILE). The run then fails naming the rank and its last error, and
its log gets every rank's stderr tail (torchrun's --redirects files).

A cancel reaches rank 0 as a stop request; every rank agrees to stop at the next step (trainers.run.loop
checks `any_process`). Processes that have not stopped RUN_STOP_GRACE_S later are killed, as are the
survivors of a failed rank once torchrun has had FAILURE_GRACE_S to stop them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
from django.conf import settings

from trainers.report import Reporter
from trainers.scale.distributed import torchrun_command
from workers.relay import Relay

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "trainers.scale.remote"
FAILURE_GRACE_S = 5.0  # after a rank failed: time for torchrun to stop the others and write its summary
TERMINATE_WAIT_S = 10.0  # after SIGTERM to torchrun (it stops its ranks): then everything is killed
STDERR_TAIL_LINES = 20
# The ranks train and run reward code; they need none of the studio's own secrets.
STUDIO_SECRETS = ("DATABASE_URL", "SECRET_KEY", "REDIS_URL", "STUDIO_ADMIN_PASSWORD")


@dataclass
class GroupResult:
    status: str  # "succeeded" | "cancelled" | "failed"
    detail: str = ""
    steps: int = 0


def run_group(spec, reporter: Reporter, should_stop: Callable[[], bool], nproc: int,
              devices: list[str]) -> GroupResult:  # fmt: skip
    """Run `spec` (a RunSpec) as `nproc` processes on this machine, on `devices` (leased GPUs; [] for CPU),
    until they end; reports go to `reporter`. Never raises for the processes' own failures."""
    run_dir = Path(spec.checkpoint.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = run_dir / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    log_dir = run_dir / "ranks"
    console = run_dir / "torchrun.log"
    relay = Relay(reporter, should_stop, nproc)
    options = ["--log-dir", str(log_dir), "--redirects", "3", "--tee", "3"]
    command = torchrun_command([str(spec_path)], nproc, module=ENTRY, options=options)
    where = f"GPUs {', '.join(devices)}" if devices else "CPU (gloo)"
    reporter.log(f"starting {nproc} processes with torchrun on {where}")
    forced = ""
    try:
        with console.open("wb") as out:
            # A session of its own: a signal to the worker's process group (a deploy, the studio's Ctrl-C)
            # would make torchrun kill the ranks at once; the stop reaches rank 0 through the relay
            # instead, and the ranks checkpoint first. A worker killed outright closes the relay, and
            # the ranks stop by themselves (trainers.scale.remote).
            proc = subprocess.Popen(command, cwd=ROOT, env=child_env(relay.env(), devices), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            forced = _watch(proc, relay)
        finally:
            if proc.poll() is None:  # an error in the relay itself: the processes must not outlive the task
                stop(proc)
        relay.drain(timeout=5.0)  # rank 0's last reports, still in the socket when torchrun exited
    finally:
        relay.close()
    return _outcome(proc.returncode, relay, forced, console, log_dir, reporter)


def child_env(relay_env: dict[str, str], devices: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in STUDIO_SECRETS}
    env.update(relay_env, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if devices:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # the order nvidia-smi's indices (the leases) use
    return env


def _watch(proc: subprocess.Popen, relay: Relay) -> str:
    """Relay until torchrun exits; returns why it was stopped by force ("" when it ended by itself)."""
    failed_at: float | None = None
    while proc.poll() is None:
        relay.pump(0.2)
        now = time.monotonic()
        if relay.failures and failed_at is None:
            failed_at = now
        if failed_at is not None and now - failed_at > FAILURE_GRACE_S:
            stop(proc)
            return "failure"
        if relay.stop_sent_at is not None and now - relay.stop_sent_at > settings.RUN_STOP_GRACE_S:
            stop(proc)
            return "cancel"
    return ""


def stop(proc: subprocess.Popen) -> None:
    """Stop torchrun and every process under it: SIGTERM first (torchrun stops its ranks), then SIGKILL
    to whatever is left. The ranks are found before torchrun goes: each runs in a session of its own,
    so nothing else would reach them once their parent is gone."""
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(TERMINATE_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for child in tree:
        with contextlib.suppress(psutil.Error):  # gone already
            child.kill()  # psutil checks it is still the same process (pid reuse)
    psutil.wait_procs(tree, timeout=5)


def _outcome(returncode: int, relay: Relay, forced: str, console: Path, log_dir: Path,
             reporter: Reporter) -> GroupResult:  # fmt: skip
    result = relay.result
    if returncode == 0 and result is not None and not relay.failures:
        return GroupResult(str(result.get("status") or "failed"), str(result.get("detail") or ""),
                           int(result.get("steps") or 0))  # fmt: skip
    if forced == "cancel":
        return GroupResult("cancelled", f"stopped by force: the processes were still running "
                                        f"{settings.RUN_STOP_GRACE_S:.0f} s after the cancel")  # fmt: skip
    message, failed_rank = failure_message(relay, returncode, _read(console), log_dir)
    for rank in sorted(_rank_dirs(log_dir), key=lambda r: r == failed_rank):  # the failed rank's last
        tail = _tail(_rank_dirs(log_dir)[rank] / "stderr.log", STDERR_TAIL_LINES)
        reporter.log(f"rank {rank} stderr, last lines:\n{tail or '(none)'}")
    return GroupResult("failed", message)


def failure_message(relay: Relay, returncode: int, console: str, log_dir: Path) -> tuple[str, int | None]:
    """("rank R failed: why", R): the first failure the relay saw, else the one torchrun names as the
    root cause; why from the rank's own error, its error file, or the exit code torchrun saw. A rank's
    plain failure (trainers.report.PlainFailure) is the run's error as it stands, as in one process."""
    exits = torchrun_failures(console)
    root = root_cause(console)
    # torchrun stops the survivors of a failure with SIGTERM: they are not its cause.
    causes = [f for f in relay.failures if "SIGTERM" not in exits.get(f[0], "")] or relay.failures
    if causes:
        rank, why = causes[0]
    elif root is not None:
        rank, why = root, ""
    else:
        return f"the run's processes failed (torchrun exited with {returncode}) before any rank started", None
    error = relay.ranks[rank].error if rank in relay.ranks else None
    if error and error.get("plain"):  # one line saying what to do (a model that cannot be downloaded...)
        return why, rank
    if not error:
        error_file = _error_file(log_dir, rank)
        if error_file:
            why = error_file
        elif rank in exits:
            why = exits[rank]
    return f"rank {rank} failed: {why or 'it exited'}", rank


FAILURE = re.compile(
    r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+) \(pid: \d+\)(?:\s*\((\w+)\))?"
)


def torchrun_failures(console: str) -> dict[int, str]:
    """{rank: "killed by SIGKILL (exit code -9)" | "exit code 1"} from torchrun's failure summary."""
    out = {}
    for rank, code, name in FAILURE.findall(console):
        code = int(code)
        if code < 0:
            name = name or _signal_name(-code)
            out[int(rank)] = f"killed by {name} (exit code {code})"
        else:
            out[int(rank)] = f"exit code {code}"
    return out


def root_cause(console: str) -> int | None:
    """The rank torchrun's summary names as the first observed failure."""
    _, found, after = console.rpartition("Root Cause (first observed failure):")
    match = FAILURE.search(after) if found else None
    return int(match.group(1)) if match else None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _rank_dirs(log_dir: Path) -> dict[int, Path]:
    """{local rank: its folder} of torchrun's last attempt (log_dir/<job>/attempt_<n>/<local rank>/)."""
    attempts = sorted(log_dir.glob("*/attempt_*"), key=lambda p: p.stat().st_mtime)
    if not attempts:
        return {}
    return {int(p.name): p for p in attempts[-1].iterdir() if p.is_dir() and p.name.isdigit()}


def _error_file(log_dir: Path, rank: int) -> str:
    """The "Type: message" torch elastic's `record` wrote for a rank that raised; "" without one."""
    folder = _rank_dirs(log_dir).get(rank)
    try:
        data = json.loads((folder / "error.json").read_text()) if folder else None
    except (OSError, ValueError):
        return ""
    message = (data or {}).get("message")
    return str(message.get("message", "") if isinstance(message, dict) else message or "")


def _read(path: Path, limit: int = 256 * 1024) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, lines: int) -> str:
    return "\n".join(_read(path, 64 * 1024).splitlines()[-lines:])
