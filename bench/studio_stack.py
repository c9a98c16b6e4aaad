"""A studio on the local PostgreSQL and Redis for the load and fault benches (bench/load_studio.py,
bench/fault_*.py): a database of its own, made fresh, migrated; the web tier and workers started with
the launcher's own command lines; PostgreSQL's connection count read from pg_stat_activity.

Not a test helper: the benches print numbers, the suite never imports this.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launcher.processes import free_port, wait_for_port  # noqa: E402 - after the path is set

SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
REDIS_BASE = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379")


def fresh_database(name: str, server_url: str = SERVER_URL) -> str:
    """DROP and CREATE database `name` on the server; its DATABASE_URL."""
    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        db.execute(f'CREATE DATABASE "{name}"')
    return f"{server_url}/{name}"


def drop_database(name: str, server_url: str = SERVER_URL) -> None:
    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def connections(database: str, server_url: str = SERVER_URL) -> dict[str, int]:
    """pg_stat_activity of `database` (this sampler's own connection is made to `postgres`, not counted):
    {"total", "active", "idle", "idle in transaction"}, and "server": client connections to every database
    of the server (max_connections counts those)."""
    with psycopg.connect(f"{server_url}/postgres", autocommit=True, connect_timeout=5) as db:
        rows = db.execute("SELECT coalesce(state, ''), count(*) FROM pg_stat_activity WHERE datname = %s GROUP BY 1",
                          (database,)).fetchall()  # fmt: skip
        server = db.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'").fetchone()[0]
    counts = {state: n for state, n in rows}
    return {"total": sum(counts.values()), "active": counts.get("active", 0), "idle": counts.get("idle", 0),
            "idle in transaction": counts.get("idle in transaction", 0), "server": server}  # fmt: skip


def clean_redis(db: int) -> str:
    """REDIS_URL for Redis database `db`, emptied (the bench's own: groups and queues of an earlier run go)."""
    import redis

    url = f"{REDIS_BASE}/{db}"
    redis.Redis.from_url(url, socket_connect_timeout=2).flushdb()
    return url


def studio_env(database_url: str, redis_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url, "STUDIO_DATA_DIR": str(data_dir),
           "DJANGO_SETTINGS_MODULE": "studio.settings", "PYTHONUNBUFFERED": "1", **extra}  # fmt: skip
    return env


def setup_django(env: dict[str, str]) -> None:
    """Django in this process against the bench's database (call once, before any model import)."""
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "STUDIO_DATA_DIR", "DJANGO_SETTINGS_MODULE")})
    for key in ("STUDIO_HEARTBEAT_INTERVAL_S", "STUDIO_HEARTBEAT_TIMEOUT_S"):
        if key in env:
            os.environ[key] = env[key]
    import django

    django.setup()


def start_web(env: dict[str, str], log: Path, port: int | None = None) -> tuple[subprocess.Popen, int]:
    """daphne with the studio's ASGI app, as `up` starts it (launcher.studio.start_children); once it answers."""
    port = port or free_port()
    argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "studio.asgi:application"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT)
    if not wait_for_port("127.0.0.1", port, timeout=60):
        proc.kill()
        raise SystemExit(f"daphne did not answer on :{port}; see {log}")
    return proc, port


def start_worker(env: dict[str, str], hostname: str, log: Path, queues: str = "gpu", concurrency: int = 1):
    """A Celery worker with the launcher's command line (launcher.studio.worker_argv), in a process group of
    its own so a fault can be sent to the whole worker (main process and pool)."""
    from launcher.studio import worker_argv

    argv = worker_argv(queues, concurrency, hostname, root_expected=os.geteuid() == 0)
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (a Celery worker's pool processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def stop(proc: subprocess.Popen, grace: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def until(what: str, check, timeout: float, every: float = 0.5):
    """Poll `check` until it returns something truthy; that value. SystemExit naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for: {what}")
        time.sleep(every)


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


# --- the fault benches: a studio with the demo, and runs of the tiny model -------------------------


# The tiny demo as a short real run: small steps, a checkpoint every CHECKPOINT_EVERY steps.
def quick_demo(total_steps: int, every: int) -> dict:
    return {"algorithm": {"group_size": 2}, "optim": {"prompts_per_step": 2, "micro_batch_size": 4,
            "total_steps": total_steps}, "checkpoint": {"every_n_steps": every}}  # fmt: skip


def demo_studio(env: dict[str, str]):
    """Migrate and bootstrap as `up` does (the first user, the demo team, the tiny model and its experiment)
    in this process; the demo experiment and its owner."""
    setup_django(env)
    from django.core.management import call_command

    from studio.bootstrap import bootstrap
    from studio.experiments.models import Experiment

    call_command("migrate", interactive=False, verbosity=0)
    bootstrap()
    from django.contrib.auth import get_user_model

    experiment = Experiment.objects.get(name__startswith="Demo: tiny model")
    return experiment, get_user_model().objects.get(username="admin")


def run_row(run_id: int) -> dict:
    """The run's state as the database has it now (a fresh connection's view)."""
    from django.db import close_old_connections

    from studio.runs.models import Run

    close_old_connections()
    return Run.objects.filter(pk=run_id).values("state", "last_step", "restarts", "worker", "error").get()
