"""Load: people browsing live runs while trainers write, on PostgreSQL and Redis, measured with Locust.

A studio as `up` serves it (one daphne process, the studio's ASGI app) on a database of its own in the
local PostgreSQL server (`studio_bench_load`, made fresh) and its own database in the local Redis, with

- 10 live runs written by the worker's `DatabaseReporter` and 5 ingested runs streamed over HTTP by
  `rollout_client.StudioRun` (bench/load_writers.py: synthetic trainers, one step a second each by
  default, 10 metrics and 8 rollouts a step, after a history of --history steps);
- Locust users (bench/load_locustfile.py), each a person with a run page open: the page and its
  curves, rollouts and notes, its websocket held open, the inspector (filtered pages, one rollout),
  zoomed curves, the run list, a note now and then, another run sometimes.

Stages: --users (default 200) for --duration seconds, then each of --ramp for --ramp-duration, stopping
at the first stage that breaks (error rate above --max-errors, or an HTTP endpoint's p99 above
--max-p99-ms). Per stage: p50/p99 and errors per endpoint (Locust's own percentiles), the live-update
latency (a metric's write to its arrival on a held websocket), PostgreSQL's connections to the
database (pg_stat_activity every second: mean and max, and how many were idle in a transaction), the
load average, and the CPU seconds daphne and Locust used. At the end: rows stored against rows the
writers reported. A table is printed; everything goes to bench/out/load_studio.json.

    pip install -r bench/requirements-load.txt          # locust==2.47.0
    python bench/load_studio.py                          # 200 users 60 s, then 400, 800 for 30 s each
    python bench/load_studio.py --users 20 --duration 15 --ramp ""   # a smoke run

Needs the local PostgreSQL (BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432) and Redis
(BENCH_REDIS_URL, default redis://127.0.0.1:6379; database 13 is emptied and used). Not run by the suite.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import studio_stack as stack  # noqa: E402 - bench/ is the script's folder, first on the path

DB_NAME = "studio_bench_load"
REDIS_DB = 13
OUT = ROOT / "bench" / "out"
PASSWORD = "bench-password-123"


def setup(n_runs: int) -> dict:
    """Migrate; a user with an API token and a logged-in session, a team, the live studio runs."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from studio.accounts.models import OWNER, Team
    from studio.runs.models import Run

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password=PASSWORD)
    team = Team.objects.create(name="bench")
    team.add_member(user, OWNER)
    token = Token.objects.create(user=user)
    session = SessionStore()
    session[SESSION_KEY], session[HASH_SESSION_KEY] = str(user.pk), user.get_session_auth_hash()
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session.set_expiry(7 * 86400)
    session.create()
    runs = [Run.objects.create(team=team, name=f"live-{i}", spec={}, state="running", total_steps=10**6, worker="bench")
            for i in range(n_runs)]  # fmt: skip
    return {"team": team.pk, "token": token.key, "session": session.session_key, "runs": [r.pk for r in runs]}


def ingest_runs(url: str, token: str, team: int, n: int) -> list[dict]:
    """Ingested runs made through the API as a trainer elsewhere makes them (rollout_client)."""
    from rollout_client import StudioRun

    made = [StudioRun.create(url, token, team=team, name=f"ingest-{i}", criteria=["correct"]) for i in range(n)]
    return [{"id": r.run_id, "token": r.token} for r in made]


def last_steps(run_ids: list[int]) -> list[int]:
    from django.db import close_old_connections

    from studio.runs.models import Run

    close_old_connections()
    return list(Run.objects.filter(pk__in=run_ids).values_list("last_step", flat=True))


class Sampler(threading.Thread):
    """pg_stat_activity of the bench's database once a second."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[dict[str, int]] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(1.0):
            try:
                self.samples.append(stack.connections(DB_NAME))
            except Exception as exc:  # noqa: BLE001 - the server refusing us is itself a finding
                self.errors.append(f"{type(exc).__name__}: {exc}"[:200])

    def summary(self) -> dict:
        totals = [s["total"] for s in self.samples] or [0]
        return {"mean": round(statistics.mean(totals), 1), "max": max(totals),
                "max_active": max((s["active"] for s in self.samples), default=0),
                "max_idle_in_transaction": max((s["idle in transaction"] for s in self.samples), default=0),
                "max_server": max((s["server"] for s in self.samples), default=0),
                "samples": len(self.samples), "sampler_errors": self.errors[:5]}  # fmt: skip


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def max_connections() -> int:
    import psycopg

    with psycopg.connect(f"{stack.SERVER_URL}/postgres", autocommit=True) as db:
        return int(db.execute("SHOW max_connections").fetchone()[0])


def run_stage(users: int, duration: float, spawn_rate: float, url: str, config_path: Path, web_pid: int,
              prefix: Path) -> dict:  # fmt: skip
    """One Locust run, headless, with the database sampled; its stats per endpoint."""
    sampler = Sampler()
    sampler.start()
    web_cpu = cpu_seconds(web_pid)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    argv = [sys.executable, "-m", "locust", "-f", str(ROOT / "bench" / "load_locustfile.py"), "--headless",
            "-u", str(users), "-r", str(spawn_rate), "-t", f"{int(duration)}s", "--host", url, "--csv", str(prefix),
            "--only-summary", "--stop-timeout", "5", "--loglevel", "WARNING"]  # fmt: skip
    env = {**os.environ, "BENCH_LOAD_CONFIG": str(config_path)}
    locust = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=duration + 120)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler.halt.set()
    sampler.join()
    with open(f"{prefix}_stats.csv") as stats, open(f"{prefix}_failures.csv") as errors:
        rows, failures = list(csv.DictReader(stats)), list(csv.DictReader(errors))
    endpoints = []
    for row in rows:
        if row["Name"] == "Aggregated":
            continue
        count, failed = int(row["Request Count"]), int(row["Failure Count"])
        endpoints.append({"type": row["Type"], "name": row["Name"], "requests": count, "failures": failed,
                          "error_rate": failed / count if count else 0.0, "p50_ms": float(row["50%"] or 0),
                          "p99_ms": float(row["99%"] or 0), "max_ms": float(row["Max Response Time"] or 0),
                          "rps": float(row["Requests/s"] or 0)})  # fmt: skip
    http = [e for e in endpoints if e["type"] not in ("WS",)]
    total = sum(e["requests"] for e in http)
    failed = sum(e["failures"] for e in http)
    return {
        "users": users, "duration_s": duration, "wall_s": round(wall, 1), "endpoints": endpoints,
        "http_requests": total, "http_failures": failed, "http_error_rate": failed / total if total else 0.0,
        "http_rps": round(sum(e["rps"] for e in http), 1),
        "errors": [{"name": f["Name"], "error": f["Error"][:300], "count": int(f["Occurrences"])} for f in failures][:10],
        "db_connections": sampler.summary(), "load_average_after": stack.load_average(),
        "cpu_s": {"daphne": round(cpu_seconds(web_pid) - web_cpu, 1),
                  "locust": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)},
        "locust_exit": locust.returncode, "locust_stderr_tail": locust.stderr[-1500:],
    }  # fmt: skip


def broke(stage: dict, max_errors: float, max_p99_ms: float) -> str:
    """Why the stage counts as broken ('' if it held)."""
    why = []
    if stage["http_error_rate"] > max_errors:
        why.append(f"HTTP error rate {stage['http_error_rate']:.1%} > {max_errors:.0%}")
    slow = [e for e in stage["endpoints"] if e["type"] != "WS" and e["p99_ms"] > max_p99_ms]
    if slow:
        worst = max(slow, key=lambda e: e["p99_ms"])
        why.append(
            f"p99 of {len(slow)} endpoints above {max_p99_ms:.0f} ms (worst {worst['name']} {worst['p99_ms']:.0f} ms)"
        )
    ws = {e["name"]: e for e in stage["endpoints"] if e["type"] == "WS"}
    if (connect := ws.get("connect")) and connect["error_rate"] > max_errors:
        why.append(f"websocket connects failing {connect['error_rate']:.1%}")
    if (dropped := ws.get("dropped")) and dropped["requests"]:
        why.append(f"{dropped['requests']} held websockets dropped by the server")
    return "; ".join(why)


def print_stage(stage: dict) -> None:
    db = stage["db_connections"]
    print(f"\n{stage['users']} users, {stage['duration_s']:.0f} s: {stage['http_requests']} HTTP requests "
          f"({stage['http_rps']} /s), errors {stage['http_failures']} ({stage['http_error_rate']:.2%}); "
          f"load average {stage['load_average_after']}; CPU s daphne {stage['cpu_s']['daphne']}, "
          f"locust {stage['cpu_s']['locust']}")  # fmt: skip
    print(f"  PostgreSQL connections to the database: mean {db['mean']}, max {db['max']} (active max "
          f"{db['max_active']}, idle in transaction max {db['max_idle_in_transaction']}); the whole server max "
          f"{db['max_server']}")  # fmt: skip
    print(f"  {'type':<5} {'endpoint':<38} {'requests':>8} {'errors':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for e in sorted(stage["endpoints"], key=lambda e: (e["type"] == "WS", e["name"])):
        print(f"  {e['type']:<5} {e['name']:<38} {e['requests']:>8} {e['failures']:>7} {e['p50_ms']:>8.0f} "
              f"{e['p99_ms']:>8.0f} {e['max_ms']:>8.0f}")  # fmt: skip
    for err in stage["errors"][:5]:
        print(f"  error x{err['count']}: {err['name']}: {err['error'][:160]}")
    if stage["broke"]:
        print(f"  BROKE: {stage['broke']}")


def stored_counts(run_ids: list[int]) -> dict[str, int]:
    from django.db import close_old_connections

    from studio.runs.models import MetricPoint, Rollout

    close_old_connections()
    return {"metrics": MetricPoint.objects.filter(run_id__in=run_ids).count(),
            "rollouts": Rollout.objects.filter(run_id__in=run_ids).count()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of the first stage")
    parser.add_argument("--ramp", default="400,800", help="more users, one stage each, until one breaks ('' none)")
    parser.add_argument("--ramp-duration", type=float, default=30.0)
    parser.add_argument("--spawn-rate", type=float, default=20.0, help="users started per second")
    parser.add_argument("--runs", type=int, default=10, help="live runs written by the worker's reporter")
    parser.add_argument("--ingest", type=int, default=5, help="runs streamed through the ingest API")
    parser.add_argument("--rate", type=float, default=1.0, help="steps per second per run")
    parser.add_argument("--history", type=int, default=100, help="steps each run holds before the load starts")
    parser.add_argument("--max-errors", type=float, default=0.01, help="error rate past which a stage broke")
    parser.add_argument("--max-p99-ms", type=float, default=5000.0, help="HTTP p99 past which a stage broke")
    parser.add_argument("--out", type=Path, default=OUT / "load_studio.json")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="studio-load-"))
    env = stack.studio_env(stack.fresh_database(DB_NAME), stack.clean_redis(REDIS_DB), data_dir)
    stack.setup_django(env)
    made = setup(args.runs)
    web, port = stack.start_web(env, data_dir / "web.log")
    url = f"http://127.0.0.1:{port}"
    writers = None
    stages: list[dict] = []
    try:
        ingested = ingest_runs(url, made["token"], made["team"], args.ingest)
        all_runs = made["runs"] + [r["id"] for r in ingested]
        writer_config = data_dir / "writers.json"
        writer_config.write_text(json.dumps({"url": url, "rate": args.rate, "history": args.history,
                                             "studio_runs": made["runs"], "ingest_runs": ingested}))  # fmt: skip
        writers = subprocess.Popen([sys.executable, str(ROOT / "bench" / "load_writers.py"), str(writer_config)],
                                   cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=(data_dir / "writers.log").open("w"),
                                   text=True)  # fmt: skip
        stack.until("the runs' history written", lambda: min(last_steps(all_runs) or [0]) >= args.history, 600)
        locust_config = data_dir / "locust.json"
        locust_config.write_text(json.dumps({"runs": all_runs, "session": made["session"], "token": made["token"],
                                             "history": args.history}))  # fmt: skip
        print(f"studio on {url} (PostgreSQL {DB_NAME}, max_connections {max_connections()}, Redis db {REDIS_DB}); "
              f"{len(all_runs)} live runs at {args.rate:g} step/s; {os.cpu_count()} CPUs, load average "
              f"{stack.load_average()}", flush=True)  # fmt: skip
        plan = [(args.users, args.duration)] + [(int(u), args.ramp_duration) for u in args.ramp.split(",") if u.strip()]
        for users, duration in plan:
            stage = run_stage(users, duration, args.spawn_rate, url, locust_config, web.pid,
                              data_dir / f"locust-{users}")  # fmt: skip
            stage["broke"] = broke(stage, args.max_errors, args.max_p99_ms)
            stages.append(stage)
            print_stage(stage)
            if stage["broke"]:
                break
    finally:
        reported = {}
        if writers is not None:
            writers.terminate()
            out, _ = writers.communicate(timeout=120)
            lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            reported = next((line["counts"] for line in lines if "counts" in line), {})
        stack.stop(web)
    sums = {k: sum(c[k] for c in reported.values()) for k in ("steps", "metrics", "rollouts")}
    stored = stored_counts(all_runs)
    posts = [ms for c in reported.values() for ms in c.get("post_ms", [])]
    writes = {"reported": sums, "stored": stored,
              "ingest_post_ms": {"p50": round(statistics.median(posts), 1) if posts else None,
                                 "p99": round(sorted(posts)[int(0.99 * (len(posts) - 1))], 1) if posts else None,
                                 "n": len(posts)},
              "ingest_failed_posts": sum(c.get("failed_posts", 0) for c in reported.values())}  # fmt: skip
    print(f"\nwriters: reported {sums['steps']} steps, {sums['metrics']} metric points, {sums['rollouts']} rollouts; "
          f"stored {stored['metrics']} metric points, {stored['rollouts']} rollouts; ingest POST per step p50 "
          f"{writes['ingest_post_ms']['p50']} ms p99 {writes['ingest_post_ms']['p99']} ms, "
          f"{writes['ingest_failed_posts']} not stored in 30 s")  # fmt: skip
    held = ", ".join(str(s["users"]) for s in stages if not s["broke"]) or "none"
    broken = next((f"{s['users']} users ({s['broke']})" for s in stages if s["broke"]), "none of the stages tried")
    print(f"held: {held} users; broke at: {broken}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                    "cpus": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()},
                                    "stages": stages, "writes": writes, "data_dir": str(data_dir)}, indent=2))  # fmt: skip
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
