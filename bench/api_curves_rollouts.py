"""Response times of the run page's data endpoints on a big run.

Fills one run with 100,000 points for each of 20 metric keys (2,000,000 points) and
1,000,000 rollouts (with two criterion scores each in the side table, and a note on one
rollout in NOTE_EVERY), then times, through Django's full request stack (URL routing, auth,
permissions, view, JSON):

- GET /api/runs/<id>/metrics/                 every curve, downsampled to 1,000 buckets
- GET /api/runs/<id>/metrics/?start=&end=     a zoomed window
- GET /api/runs/<id>/rollouts/?...            first pages with the inspector's filters, and a deep page

    python bench/api_curves_rollouts.py                    # SQLite, then PostgreSQL if reachable
    python bench/api_curves_rollouts.py --backends sqlite --rollouts 200000

The filled databases are kept (SQLite file under --data-dir, PostgreSQL database
`studio_bench`), so a second run skips the fill. Not run by the test suite.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KEYS = [
    "reward/mean", "reward/std", "reward/correct/mean", "reward/format/mean", "reward/frac_zero_std_groups",
    "advantage/mean", "advantage/std", "advantage/min", "advantage/max", "actor/loss", "actor/kl", "actor/entropy",
    "actor/clip_frac_low", "actor/clip_frac_high", "actor/grad_norm", "actor/lr", "response/length_mean",
    "response/length_max", "response/truncated_frac", "perf/tokens_per_s",
]  # fmt: skip
WORDS = [
    "the",
    "answer",
    "is",
    "so",
    "we",
    "add",
    "then",
    "multiply",
    "carry",
    "remainder",
    "therefore",
    "check",
    "step",
    "total",
    "each",
    "apple",
    "train",
]
BATCH = 20_000
# Notes are written by people, so they are sparse: one rollout in NOTE_EVERY carries one,
# its tag taken in turn from NOTE_TAGS (a quarter of them "reward hacking").
NOTE_EVERY = 250
NOTE_TAGS = ["reward hacking", "format broken", "good", ""]


def _batched(rows, size=BATCH):
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def fill(points_per_key: int, n_rollouts: int) -> int:
    """Create the big run unless a previous invocation already did; returns its id."""
    from django.db import connection, transaction

    from studio.accounts.models import OWNER, Team
    from studio.runs.models import Run

    existing = Run.objects.filter(name="bench-big").first()
    if existing and existing.total_steps == points_per_key and existing.rollouts.count() >= n_rollouts:
        return existing.pk
    if existing:
        existing.delete()
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench")
    team, _ = Team.objects.get_or_create(name="bench")
    team.add_member(user, OWNER)
    spec = {"rubric": {"criteria": [{"name": "correct"}, {"name": "format"}]}}
    run = Run.objects.create(team=team, name="bench-big", spec=spec, state="succeeded", total_steps=points_per_key)
    rng = random.Random(0)
    t0 = time.time()

    def points():
        for key in KEYS:
            base = rng.random()
            for step in range(points_per_key):
                value = base + math.sin(step / 500.0) + rng.gauss(0, 0.1)
                yield (run.pk, step, key, value, 1.7e9 + 3.0 * step)

    with transaction.atomic(), connection.cursor() as cur:
        for batch in _batched(points()):
            cur.executemany(
                "INSERT INTO runs_metricpoint (run_id, step, key, value, wall_time) VALUES (%s, %s, %s, %s, %s)", batch
            )
    print(f"  filled {points_per_key * len(KEYS):,} metric points in {time.time() - t0:.0f} s", flush=True)

    t0 = time.time()
    group = 8
    steps = max(1, n_rollouts // (group * 16))

    def rollouts():
        for i in range(n_rollouts):
            step = min(steps - 1, i // (group * 16))
            prompt_id = f"p{(i // group) % 5000}"
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) + f" #### {rng.randint(0, 99)}"
            correct = float(rng.random() < 0.4)
            fmt = float(rng.random() < 0.8)
            scores = {
                "correct": {"score": correct, "explanation": "", "error": None},
                "format": {"score": fmt, "explanation": "", "error": None},
            }
            finish = "length" if rng.random() < 0.1 else "stop"
            yield (
                run.pk, step, prompt_id, i % group, json.dumps(f"Question {prompt_id}: how many apples?"),
                json.dumps(text), text[:200], correct + 0.2 * fmt, rng.gauss(0, 1), len(text) // 4, finish,
                json.dumps(scores),
            )  # fmt: skip

    with transaction.atomic(), connection.cursor() as cur:
        for batch in _batched(rollouts()):
            cur.executemany(
                "INSERT INTO runs_rollout (run_id, step, prompt_id, sample_index, prompt, completion, preview, reward,"
                " advantage, num_tokens, finish_reason, scores) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                batch,
            )
        cur.execute(
            "INSERT INTO runs_rolloutscore (rollout_id, run_id, criterion, score)"
            " SELECT id, run_id, 'correct', CASE WHEN reward >= 1 THEN 1.0 ELSE 0.0 END FROM runs_rollout WHERE run_id = %s",
            [run.pk],
        )
        cur.execute(
            "INSERT INTO runs_rolloutscore (rollout_id, run_id, criterion, score)"
            " SELECT id, run_id, 'format', CASE WHEN reward - FLOOR(reward) > 0.1 THEN 1.0 ELSE 0.0 END FROM runs_rollout WHERE run_id = %s",
            [run.pk],
        )
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    print(
        f"  filled {n_rollouts:,} rollouts (+ {2 * n_rollouts:,} criterion scores) in {time.time() - t0:.0f} s",
        flush=True,
    )
    return run.pk


def add_notes(run) -> None:
    """Note one rollout in NOTE_EVERY unless the run already has rollout notes (a kept database)."""
    from studio.sharing.models import Note

    if Note.objects.filter(run=run, rollout__isnull=False).exists():
        return
    t0 = time.time()
    ids = run.rollouts.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=BATCH)
    notes = (
        Note(run=run, rollout_id=pk, tag=NOTE_TAGS[i % len(NOTE_TAGS)], text="bench note")
        for i, pk in enumerate(pk for n, pk in enumerate(ids) if n % NOTE_EVERY == 0)
    )
    for batch in _batched(notes):
        Note.objects.bulk_create(batch)
    print(f"  noted {Note.objects.filter(run=run).count():,} rollouts in {time.time() - t0:.0f} s", flush=True)


def timed(client, url: str, repeat: int) -> tuple[float, float, int, dict]:
    """(median ms, max ms, bytes, last JSON body) over `repeat` requests after one warm-up."""
    client.get(url)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        resp = client.get(url)
        times.append((time.perf_counter() - t0) * 1000)
    if resp.status_code != 200:
        raise RuntimeError(f"{url}: HTTP {resp.status_code} {resp.content[:300]!r}")
    return statistics.median(times), max(times), len(resp.content), resp.json()


def measure(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from studio.runs.models import Run

    call_command("migrate", verbosity=0)
    run_id = fill(args.points, args.rollouts)
    run = Run.objects.get(pk=run_id)
    add_notes(run)
    client = Client(HTTP_HOST="localhost")  # an allowed host; the test client says "testserver"
    client.force_login(run.team.memberships.first().user)
    print(
        f"  {connection.vendor}: run {run_id}, {args.points:,} points x {len(KEYS)} keys, {run.rollouts.count():,} rollouts"
    )

    def report(label: str, url: str, check=None) -> None:
        median, worst, size, body = timed(client, url, args.repeat)
        extra = check(body) if check else ""
        print(
            f"  {label:<46} median {median:7.1f} ms  max {worst:7.1f} ms  {size / 1024:7.0f} KiB  {extra}", flush=True
        )

    base = f"/api/runs/{run_id}/metrics/"
    report("curves: all 20 keys, 1,000 buckets", f"{base}?points=1000", lambda b: f"{len(b['series'])} series")
    report("curves: all keys by wall time", f"{base}?points=1000&x=time")
    report("curves: zoom to 5,000 steps", f"{base}?points=1000&start=40000&end=45000")
    report("curves: one key", f"{base}?points=1000&keys=reward/mean")

    rollouts = f"/api/runs/{run_id}/rollouts/"
    probe = client.get(f"{rollouts}?limit=1")
    if probe.status_code != 200:
        print(f"  rollouts endpoint not available (HTTP {probe.status_code}); skipped")
        return
    first = probe.json()
    filters = [
        ("rollouts: newest first", "order=-step&limit=50"),
        ("rollouts: step range", "step_min=2000&step_max=2100&limit=50"),
        ("rollouts: reward range, best first", "reward_min=1&order=-reward&limit=50"),
        ("rollouts: finish_reason=length", "finish_reason=length&limit=50"),
        ("rollouts: criterion correct <= 0", "criterion=correct&score_max=0&limit=50"),
        ("rollouts: criterion + step range", "criterion=format&score_min=1&step_min=100&step_max=300&limit=50"),
        ("rollouts: text search (q), common words", "q=remainder%20therefore&limit=50"),
        ("rollouts: text search (q), no match: reads all", "q=zebra&limit=50"),
        ("rollouts: longest first", "order=-num_tokens&limit=50"),
        ("rollouts: shortest first", "order=num_tokens&limit=50"),
        ("rollouts: highest advantage", "order=-advantage&limit=50"),
        ("rollouts: lowest advantage + step range", "order=advantage&step_min=2000&step_max=2100&limit=50"),
        ("rollouts: with any note", "has_note=1&limit=50"),
        ("rollouts: note tagged reward hacking", "note_tag=reward%20hacking&limit=50"),
        ("rollouts: note tag + reward range, best first", "note_tag=good&reward_min=1&order=-reward&limit=50"),
        ("rollouts: note tag nobody used", "note_tag=zebra&limit=50"),
    ]
    for label, query in filters:
        report(label, f"{rollouts}?{query}", lambda b: f"{len(b['results'])} rows")
    cursor = first.get("next_cursor")
    if cursor:
        for order in ("-step", "-num_tokens", "advantage"):
            page = client.get(f"{rollouts}?order={order}&limit=50").json()
            for _ in range(20):  # walk 20 pages deep, then time the next one
                page = client.get(f"{rollouts}?order={order}&limit=50&cursor={page['next_cursor']}").json()
            report(
                "rollouts: page 21 via keyset cursor" + ("" if order == "-step" else f", {order}"),
                f"{rollouts}?order={order}&limit=50&cursor={page['next_cursor']}",
            )
    one = first["results"][0]["id"]
    report("rollout detail with its group", f"{rollouts}{one}/")
    if args.browser:
        open_in_browser(run, client, args.repeat)


def open_in_browser(run, client, repeat: int) -> None:
    """Seconds from navigating to the run page to every curve drawn and the first rollout
    page listed, in headless Chromium against a daphne serving this database."""
    import tempfile

    from playwright.sync_api import sync_playwright

    from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS, free_port, wait_for_port

    if not CHROMIUM.exists():
        print("  run page in the browser: skipped, no /usr/bin/chromium")
        return
    port = free_port()
    log = Path(tempfile.mkdtemp()) / "daphne.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "studio.asgi:application"],
        cwd=ROOT, env=dict(os.environ), stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for_port(port, server, log)
        session = client.cookies["sessionid"].value
        times, firsts = [], []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1680, "height": 1050})
            context.add_cookies([{"name": "sessionid", "value": session, "url": f"http://127.0.0.1:{port}"}])
            page = context.new_page()
            for _ in range(repeat + 1):  # the first visit also fetches plotly.js (4.6 MB) into the cache
                t0 = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/runs/{run.pk}/")
                page.wait_for_function(
                    "document.querySelector('[data-panel=reward] .chart')?.data?.find((t) => t.name)?.x.length > 0",
                    timeout=60_000,
                )
                firsts.append(time.perf_counter() - t0)
                page.wait_for_selector("body[data-ready='1']", timeout=60_000)
                times.append(time.perf_counter() - t0)
            panels = page.locator(".chart-panel").count()
            fetches = page.evaluate(
                "performance.getEntriesByType('resource').filter(e => /metrics|rollouts|plotly/.test(e.name))"
                ".map(e => [e.name.split('?')[0].split('/').slice(-2).join('/'), Math.round(e.duration)])"
            )
            script_ms = page.evaluate(
                "Math.round(performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd)"
            )
            browser.close()
        warm, warm_first = times[1:], firsts[1:]
        print(
            f"  run page in Chromium, {panels} charts: reward curve drawn after median {statistics.median(warm_first):.2f} s,"
            f" every curve and the rollout list after median {statistics.median(warm):.2f} s (max {max(warm):.2f} s);"
            f" the very first visit, which also downloads plotly.js, {times[0]:.2f} s"
        )
        print(f"    last visit: DOMContentLoaded at {script_ms} ms; fetches (ms): {fetches}")
    except OSError as err:
        print(f"  run page in the browser: failed ({err})")
    finally:
        server.terminate()
        server.wait(timeout=10)


def postgres_url(explicit: str | None) -> str | None:
    """A URL of a reachable bench database on PostgreSQL (created if missing), or None."""
    url = explicit or "postgres://postgres@127.0.0.1:5432/studio_bench"
    try:
        import psycopg

        admin = url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True, connect_timeout=2) as conn:
            name = url.rsplit("/", 1)[1]
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
        return url
    except Exception as err:  # noqa: BLE001 - any failure means "no PostgreSQL here"
        print(f"PostgreSQL not reachable ({err}); skipped")
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--points", type=int, default=100_000, help="points per metric key")
    parser.add_argument("--rollouts", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data-dir", default="/tmp/studio-bench-api")
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--browser", action="store_true", help="also time opening the run page in Chromium")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:  # DATABASE_URL is fixed per process: settings read it once
        measure(args)
        return
    for backend in args.backends.split(","):
        env = dict(os.environ, DJANGO_SETTINGS_MODULE="studio.settings", STUDIO_DATA_DIR=args.data_dir)
        env.pop("REDIS_URL", None)
        if backend == "sqlite":
            env["DATABASE_URL"] = f"sqlite:///{Path(args.data_dir) / 'bench.sqlite3'}"
        else:
            url = postgres_url(args.postgres_url)
            if url is None:
                continue
            env["DATABASE_URL"] = url
        print(f"== {backend}", flush=True)
        forwarded = ["--points", str(args.points), "--rollouts", str(args.rollouts), "--repeat", str(args.repeat)]
        forwarded += ["--browser"] if args.browser else []
        subprocess.run([sys.executable, __file__, "--inside", *forwarded], env=env, check=True)


if __name__ == "__main__":
    main()
