"""How long does page 1 of the runs table take, and in how many queries, on a long list (issue 41)?

A fresh SQLite database in a temporary folder holds RUNS runs of one team (the seeds 0..REPEATS-1 of RUNS/REPEATS
settings, so a seed group holds REPEATS runs), each with STEPS steps of reward/mean and actor/loss. For each view
it times the runs page (GET /runs/ through Django's test client: the table's queries and the template) and the
API list, best of three, and counts their queries:

    python bench/runs_table.py                    # 10,000 runs x 20 steps x 2 keys (400,000 points)
    python bench/runs_table.py --runs 2000 --steps 50
    python bench/runs_table.py --folder /tmp/bench-runs-table-x   # again on the runs written there before
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VIEWS = {
    "newest first": {},
    "sort by -last:reward/mean": {"col": ["last:reward/mean", "set:optim.lr"], "sort": "-last:reward/mean"},
    "sort by -best:reward/mean": {"col": ["best:reward/mean", "last:actor/loss"], "sort": "-best:reward/mean"},
    "filter set.optim.lr range, sort by a setting": {
        "set.optim.lr": "1e-4..1e-3",
        "sort": "set:optim.lr",
        "col": "last:reward/mean",
    },  # fmt: skip
    "grouped by seed, sort by mean": {
        "group": "seed",
        "col": ["last:reward/mean", "best:actor/loss"],
        "sort": "-last:reward/mean",
    },  # fmt: skip
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--folder", type=Path, help="a folder an earlier run wrote its runs into: time them again")
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="bench-runs-table-"))
    again = args.folder is not None
    os.environ.update(DJANGO_SETTINGS_MODULE="studio.settings", STUDIO_DATA_DIR=str(folder), ALLOWED_HOSTS="testserver",
                      DATABASE_URL=f"sqlite:///{folder / 'studio.sqlite3'}")  # fmt: skip
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from studio.accounts.models import OWNER, Team
    from studio.runs.models import MetricPoint, Run

    call_command("migrate", verbosity=0)
    if again:
        user = get_user_model().objects.get(username="alice")
        args.runs = 0
        print(f"{Run.objects.count()} runs, {MetricPoint.objects.count()} points in {folder}")
    else:
        user = get_user_model().objects.create_user("alice", password="pw-alice-123")
        Team.objects.create(name="bench").add_member(user, OWNER)
    team = Team.objects.get(name="bench")
    started = time.monotonic()
    for first in range(0, args.runs, 1000):
        made = Run.objects.bulk_create(
            Run(team=team, name=f"run-{i}", state="succeeded", last_step=args.steps, total_steps=args.steps,
                spec={"model": {"path": "/models/tiny"},
                      "optim": {"lr": 1e-6 * (1 + i // args.repeats), "seed": i % args.repeats}})
            for i in range(first, min(first + 1000, args.runs))
        )  # fmt: skip
        MetricPoint.objects.bulk_create(
            (MetricPoint(run=run, step=s, key=key, value=(run.pk * 7919 % 1000) / 1000 * s / args.steps, wall_time=s)
             for run in made for s in range(1, args.steps + 1) for key in ("reward/mean", "actor/loss")),
            batch_size=5000,
        )  # fmt: skip
    if not again:
        print(f"{args.runs} runs, {args.runs * args.steps * 2} points written in {time.monotonic() - started:.0f} s "
              f"to {folder}")  # fmt: skip
    client = Client()
    client.force_login(user)
    for name, params in VIEWS.items():
        for path in ("/runs/", "/api/runs/groups/" if params.get("group") else "/api/runs/"):
            times = []
            for _ in range(3):
                with CaptureQueriesContext(connection) as queries:
                    t0 = time.perf_counter()
                    response = client.get(path, params)
                    times.append(time.perf_counter() - t0)
                assert response.status_code == 200, response.content[:500]
            print(f"{name:48s} {path:18s} {min(times) * 1000:7.0f} ms  {len(queries):3d} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
