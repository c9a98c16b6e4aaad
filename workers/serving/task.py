"""workers.serve_model: one model's server process, from start to stop, on the worker that took the task.

The task holds its pool process for as long as the model is served, as a run does: the queue the
fleet accounts for (settings.CELERY_TASK_ROUTES) sees the place taken, the pool process's GPU is
leased to the server (studio.fleet.leases), and a run queued behind it waits for it to stop, saying
so, which it does once idle for settings.SERVING_IDLE_S. It checks the model's paths for the team (the path policy), starts the engine's server on a free local port with a key of
its own, waits until it answers, writes the address on the ModelServer row, then watches: the
process dying (the row FAILED with its log's end), the row asked to stop, the idle time, or the
worker shutting down (SIGTERM) each end it. The process also dies with its parent (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from datetime import timedelta
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from studio.experiments import paths
from studio.fleet import leases
from studio.runs.models import Run
from studio.serving.models import FAILED, READY, STARTING, STOPPED, STOPPING, ModelServer
from studio.serving.refs import REF
from workers import gpu
from workers.serving import engines
from workers.tasks import interrupted_by_signals

log = logging.getLogger(__name__)

WATCH_S = 1.0
LOG_TAIL_CHARS = 3000
STOP_GRACE_S = 10.0


class Stop:
    """Set by the worker's shutdown signals (workers.tasks.interrupted_by_signals)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def interrupt(self) -> None:
        self.event.set()


@shared_task(name="workers.serve_model", bind=True)
def serve_model(self, server_id: int, generation: int) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    mine = ModelServer.objects.filter(pk=server_id, generation=generation)
    if mine.filter(state=STARTING).update(worker=hostname) != 1:
        return "superseded"
    server = mine.first()
    problem = _policy_problem(server)
    if problem:
        mine.update(state=FAILED, error=problem)
        return FAILED
    device = gpu.pool_gpus().own  # the GPU this pool process is pinned to (None on a CPU machine)
    if device is not None and not leases.take_for_server(server.pk, hostname, device):
        mine.update(state=FAILED, error=f"GPU {device} of {hostname} is held by a run; try again when it ends")
        return FAILED
    stop = Stop()
    try:
        with interrupted_by_signals(stop):
            return _serve(server, mine, stop)
    finally:
        leases.release_server(server.pk)  # the fleet and waiting runs see the GPU free again


def _policy_problem(server: ModelServer) -> str | None:
    """The path policy's refusal of the model or checkpoint for the run's team, or None."""
    match = REF.match(server.ref)
    run = Run.objects.filter(pk=int(match["run"])).select_related("team").first() if match else None
    if run is None:
        return "its run no longer exists"
    for field, value in (("model", server.model_path), ("checkpoint", server.checkpoint)):
        error = paths.model_path_error(value, run.team) if value else None
        if error:
            return f"{field}: {error}"
    return None


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the worker's pool process dies (Linux prctl)."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _log_tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
    except OSError:
        return ""


def _serve(server: ModelServer, mine, stop: Stop) -> str:
    engine, why = engines.choose(settings.SERVING_ENGINE, server.checkpoint)
    host = settings.SERVING_HOST
    port, key = _free_port(host), secrets.token_urlsafe(32)
    address = f"http://{host}:{port}"
    folder = Path(settings.DATA_DIR) / "serving"
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"{server.pk}-{server.generation}.log"
    argv = engines.command(engine, server.ref, server.model_path, server.checkpoint, server.model_spec, host, port)
    env = {**os.environ, engines.KEY_ENV[engine]: key}
    log.info("serving %s with %s (%s) on %s", server.ref, engine, why, address)
    with log_path.open("w") as out:
        out.write(f"# {engine}: {why}\n")
        out.flush()
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + settings.SERVING_LOAD_TIMEOUT_S
        while not engines.answers(address, key):
            if process.poll() is not None:
                mine.update(state=FAILED, error=f"the {engine} server exited ({process.returncode}):\n"
                                                 f"{_log_tail(log_path)}")  # fmt: skip
                return FAILED
            if time.monotonic() > deadline or stop.event.is_set() or not mine.exclude(state=STOPPING).exists():
                why_not = "the worker is shutting down" if stop.event.is_set() else (
                    f"it did not answer within {settings.SERVING_LOAD_TIMEOUT_S:.0f} s")  # fmt: skip
                mine.update(state=FAILED, error=f"the {engine} server did not start: {why_not}")
                return FAILED
            time.sleep(0.5)
        now = timezone.now()
        mine.update(state=READY, address=address, key=key, engine=engine, started=now, last_used=now)
        return _watch(server, mine, process, log_path, stop)
    finally:
        _end(process)


def _watch(server: ModelServer, mine, process: subprocess.Popen, log_path: Path, stop: Stop) -> str:
    idle = timedelta(seconds=settings.SERVING_IDLE_S)
    while not stop.event.wait(WATCH_S):
        if process.poll() is not None:
            mine.update(state=FAILED, error=f"the server exited ({process.returncode}):\n{_log_tail(log_path)}")
            return FAILED
        asked = Q(state=STOPPING) | Q(last_used__lt=timezone.now() - idle)
        if not mine.exists() or mine.filter(asked).exists():
            break
    mine.exclude(state=FAILED).update(state=STOPPED, address="", key="")
    log.info("stopped serving %s", server.ref)
    return STOPPED


def _end(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@shared_task(name="workers.export_checkpoint")
def export_checkpoint(run_id: int, step: int, mode: str, target: str = "") -> dict:
    """A run's checkpoint as a Hugging Face folder: into `target` (a new folder the path policy lets the
    team write: studio.serving.exports) or, without one, the studio's exports folder with a zip to download.
    {"folder", "kind", "files", "bytes", "zip"} or {"error": "..."}."""
    from studio.runs.models import Checkpoint
    from studio.serving.exports import download_folder, target_error
    from workers.serving.export import ExportError, export_folder

    run = Run.objects.filter(pk=run_id).select_related("team").first()
    row = Checkpoint.objects.filter(run_id=run_id, step=step).order_by("-pk").first()
    section = run.spec.get("model") if run is not None and isinstance(run.spec, dict) else None
    if row is None or not isinstance(section, dict):
        return {"error": "step: no such checkpoint"}
    for field, value in (("model", section.get("path", "")), ("checkpoint", row.path)):
        error = paths.model_path_error(value, run.team) if value else None
        if error:
            return {"error": f"{field}: {error}"}
    if target:  # again here: the folder may have changed since the studio checked it
        error = target_error(target, run.team)
        if error:
            return {"error": f"folder: {error}"}
    out = Path(target) if target else download_folder(run_id) / f"step-{step}-{mode}"
    try:
        return export_folder(section, section["path"], row.path, out, mode, zipped=not target)
    except (ExportError, OSError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
