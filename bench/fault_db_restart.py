"""Fault: PostgreSQL restarted while a real run trains. Is any metric or rollout lost, or stored twice?

The database is a PostgreSQL server of the bench's own (initdb into a temp folder, started with
pg_ctl on a free port, as the `postgres` user), not the machine's shared cluster: other engineers'
tests use that one, and a restart would fail them. The restart is what `service postgresql restart`
does to a cluster (`pg_ctl restart -m fast`: every connection terminated, the server back), with the
server held down for --down-s seconds in between so the outage spans several steps. A studio with
the demo bootstrapped as `up` makes it, one Celery run worker, the tiny model's run checkpointing
every --every steps.

The trainer reports a fixed set per step (the same metric keys every step, prompts_per_step x
group_size rollouts), so what it reported is the step count it finished with times those; the bench
compares that with the rows stored, step by step (missing steps, steps stored twice), and prints how
the run went through the outage (its state, restarts, the worker's own lines about it).

    python bench/fault_db_restart.py                  # 40 steps, PostgreSQL down 10 s at step 5
    python bench/fault_db_restart.py --down-s 60      # an outage longer than the heartbeat timeout
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import studio_stack as stack  # noqa: E402 - bench/ is the script's folder, first on the path

from launcher.processes import free_port  # noqa: E402

PG_BIN = Path(os.environ.get("BENCH_PG_BIN", "/usr/lib/postgresql/15/bin"))
REDIS_DB = 12
GROUP, PROMPTS = 2, 2  # stack.quick_demo's group_size and prompts_per_step


def as_postgres(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """A PostgreSQL tool run as the `postgres` user (the server refuses to run as root)."""
    done = subprocess.run(["runuser", "-u", "postgres", "--", *argv], capture_output=True, text=True)
    if check and done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    return done


class PrivateServer:
    """A PostgreSQL server of the bench's own in `folder`, on `port`."""

    def __init__(self, folder: Path, port: int) -> None:
        self.folder, self.port = folder, port
        self.data, self.log = folder / "data", folder / "server.log"

    def init(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.folder, "postgres", "postgres")
        as_postgres(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def pg_ctl(self, action: str, *extra: str) -> None:
        as_postgres(str(PG_BIN / "pg_ctl"), action, "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                    "-o", f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1", *extra)  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}"


def per_step(run_id: int) -> tuple[dict[int, int], dict[int, int], int]:
    """(metric points per step, rollouts per step, step/key pairs stored more than once) of the run's
    training rollouts (validation ones, split "validation", are another count)."""
    from django.db import close_old_connections
    from django.db.models import Count

    from studio.runs.models import MetricPoint, Rollout

    close_old_connections()
    points = MetricPoint.objects.filter(run_id=run_id)
    metrics = dict(points.values_list("step").annotate(n=Count("id")))
    twice = points.values("step", "key").annotate(n=Count("id")).filter(n__gt=1).count()
    rollouts = dict(Rollout.objects.filter(run_id=run_id).exclude(split="validation").values_list("step")
                    .annotate(n=Count("id")))  # fmt: skip
    return metrics, rollouts, twice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=10, help="checkpoint every N steps")
    parser.add_argument("--at-step", type=int, default=5, help="restart the database once the run is past this step")
    parser.add_argument("--down-s", type=float, default=10.0, help="seconds the server stays down")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="studio-fault-db-"))
    folder.chmod(0o755)  # the server runs as `postgres`: it must reach its folder inside
    data_dir = folder / "studio"
    data_dir.mkdir()
    server = PrivateServer(folder / "pg", free_port())
    server.init()
    server.pg_ctl("start")
    worker = None
    try:
        env = stack.studio_env(stack.fresh_database("studio", server.url), stack.clean_redis(REDIS_DB), data_dir,
                               STUDIO_ADMIN_PASSWORD="bench-password-123")  # fmt: skip
        experiment, user = stack.demo_studio(env)
        worker = stack.start_worker(env, "dbfault@%h", data_dir / "worker.log")
        from django.db import connection

        from studio.experiments.services import launch

        run = launch(experiment, user, name="database restart", overrides=stack.quick_demo(args.steps, args.every))
        stack.until(f"run past step {args.at_step}", lambda: stack.run_row(run.pk)["last_step"] >= args.at_step, 300)
        connection.close()  # this process's own connection: the restart would break it anyway
        step_before = stack.run_row(run.pk)["last_step"]
        connection.close()
        t0 = time.monotonic()
        server.pg_ctl("stop", "-m", "fast")
        stopped_s = time.monotonic() - t0
        time.sleep(args.down_s)
        server.pg_ctl("start")
        outage_s = time.monotonic() - t0
        step_after = stack.run_row(run.pk)["last_step"]
        print(f"run {run.pk}: PostgreSQL stopped (fast: connections terminated) at step {step_before} in "
              f"{stopped_s:.1f} s, started again after {outage_s:.1f} s; the run's stored step then {step_after}",
              flush=True)  # fmt: skip
        ended = stack.until(f"run {run.pk} ends", lambda: (r := stack.run_row(run.pk))["state"]
                            not in ("queued", "running") and r, timeout=900)  # fmt: skip
        metrics, rollouts, twice = per_step(run.pk)
        finished = ended["last_step"]
        keys = metrics.get(1, 0)
        expected_rollouts = PROMPTS * GROUP
        missing_metrics = [s for s in range(1, finished + 1) if metrics.get(s, 0) < keys]
        missing_rollouts = [s for s in range(1, finished + 1) if rollouts.get(s, 0) < expected_rollouts]
        extra_rollouts = [s for s, n in rollouts.items() if n > expected_rollouts]
        lines = [line for line in (data_dir / "worker.log").read_text().splitlines()
                 if "unreachable" in line or "heartbeat" in line or "written again" in line or "writing" in line]  # fmt: skip
        print(f"  the run ended {ended['state']} at step {finished} (restarts {ended['restarts']})")
        print(
            f"  metric points: reported {keys} keys x {finished} steps = {keys * finished}, stored "
            f"{sum(metrics.values())}; steps short of keys {missing_metrics}; step/key pairs stored twice {twice}"
        )
        print(
            f"  rollouts: reported {expected_rollouts} x {finished} = {expected_rollouts * finished}, stored "
            f"{sum(rollouts.values())}; steps missing some {missing_rollouts}; steps with too many {extra_rollouts}"
        )
        print("  the worker's lines about the outage:\n    " + "\n    ".join(line[-200:] for line in lines[:8]))
        lost = keys * finished - sum(metrics.values()) + expected_rollouts * finished - sum(rollouts.values())
        print(f"\ndatabase restart at step {step_before}, down {outage_s:.1f} s: run {ended['state']} at step {finished}; "
              f"metrics {sum(metrics.values())}/{keys * finished}, rollouts {sum(rollouts.values())}/"
              f"{expected_rollouts * finished} stored, {twice} duplicates; "
              f"{'NOTHING LOST' if lost == 0 and twice == 0 and not extra_rollouts else 'ROWS LOST OR DOUBLED'}; "
              f"load average {stack.load_average()}; logs in {data_dir}")  # fmt: skip
    finally:
        if worker is not None:
            stack.stop(worker, grace=30)
        server.pg_ctl("stop", "-m", "fast")
        shutil.rmtree(server.data, ignore_errors=True)


if __name__ == "__main__":
    main()
