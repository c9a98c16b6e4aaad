"""Take the screenshots of the runs table (docs/runs-table.png) and of a seed group's band on the compare page
(docs/compare-band.png).

Not a test (nothing runs it automatically). It starts a studio without a worker (tests/browser/live_studio.py),
writes a small learning-rate sweep as runs (four learning rates x three seeds, 40 steps of reward/mean and
actor/kl shaped like GRPO runs, their rate setting the speed), opens the table grouped by seed with a reward and a
setting column, sorted by the best reward, one group expanded, then compares that group's three runs.

    .venv/bin/python bench/screenshot_runs_table.py [--out docs]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS, LiveStudio  # noqa: E402

SETUP = """
import json, math, random, time
import django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from studio.accounts.models import OWNER, Team
from studio.runs.models import MetricPoint, Run
from studio.runs.tags import set_tags

alice = get_user_model().objects.create_user("alice", password="pw-alice-123")
team = Team.objects.create(name="Reasoning")
team.add_member(alice, OWNER)
ids = {}
for lr in (1e-6, 3e-6, 1e-5, 3e-5):
    for seed in (1, 2, 3):
        rng = random.Random(seed * 1000 + int(lr * 1e7))
        spec = {"model": {"path": "HuggingFaceTB/SmolLM2-135M-Instruct"},
                "optim": {"lr": lr, "seed": seed, "total_steps": 40}, "algorithm": {"kl_beta": 0.02}}
        run = Run.objects.create(team=team, name=f"countdown-lr{lr:g}-s{seed}", spec=spec, state="succeeded",
                                 last_step=40, total_steps=40, created_by=alice)
        speed = {1e-6: 0.03, 3e-6: 0.08, 1e-5: 0.15, 3e-5: 0.3}[lr]
        points = []
        for step in range(1, 41):
            reward = 0.15 + 0.6 * (1 - math.exp(-speed * step)) + rng.gauss(0, 0.04)
            if lr == 3e-5 and step > 25:
                reward -= 0.02 * (step - 25)  # too fast: it unlearns
            points += [MetricPoint(run=run, step=step, key="reward/mean", value=reward, wall_time=time.time() + step),
                       MetricPoint(run=run, step=step, key="actor/kl", value=speed * step / 40 + rng.random() * 0.01,
                                   wall_time=time.time() + step)]
        MetricPoint.objects.bulk_create(points)
        if lr == 1e-5:
            set_tags(run, ["baseline"])
        ids[f"{lr:g}/{seed}"] = run.pk
s = SessionStore()
s[SESSION_KEY], s[BACKEND_SESSION_KEY] = str(alice.pk), "django.contrib.auth.backends.ModelBackend"
s[HASH_SESSION_KEY] = alice.get_session_auth_hash()
s.create()
print(json.dumps({"session": s.session_key, "ids": ids}))
"""
TABLE = "?col=best:reward/mean&col=last:reward/mean&col=max:actor/kl&col=set:optim.lr&sort=-best:reward/mean&group=seed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    studio = LiveStudio(Path(tempfile.mkdtemp(prefix="shot-runs-table-"))).start(worker=False)
    try:
        done = subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=studio.env, check=True,
                              capture_output=True, text=True)  # fmt: skip
        world = json.loads(done.stdout)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1366, "height": 720})
            context.add_cookies([{"name": "sessionid", "value": world["session"], "url": studio.base_url}])
            page = context.new_page()
            page.goto(f"{studio.base_url}/runs/{TABLE}")
            page.wait_for_selector("[data-runs-table][data-ready='1']")
            page.locator("tr[data-group-row] [data-expand]").first.click()
            page.screenshot(path=str(args.out / "runs-table.png"), full_page=False)
            ids = ",".join(str(world["ids"][f"1e-05/{seed}"]) for seed in (1, 2, 3))
            page.goto(f"{studio.base_url}/compare/?runs={ids}")
            page.wait_for_selector("[data-band-chart][data-ready='1']", timeout=30_000)
            page.locator("[data-bands]").screenshot(path=str(args.out / "compare-band.png"))
            browser.close()
    finally:
        studio.stop()
    print(f"wrote {args.out / 'runs-table.png'} and {args.out / 'compare-band.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
