"""A sweep's numbers against the default settings' run (issue 41): the tiny demo's learning rate (log) and
group size searched by TPE with median pruning, through a real studio, against one run of the same
experiment's default settings.

It starts a studio of its own (daphne, a Celery worker on the default and gpu queues, a private Redis, a
SQLite file in a temp folder: tests/browser/live_studio.py), makes the experiment (the tiny demo with
`--steps` steps, validation after each), runs its default settings once (alone, so its wall time is its
own), then launches the sweep from the experiment's "New sweep" form in Debian's Chromium and waits for its
end. The objective is the sweep test's (tests/browser/test_sweep.py): reward/mean at the last step, since the
tiny model's held-out reward after a few steps is mostly 0.0 for every trial. Prints every trial (values,
objective, state, why pruned: at which step, by which rule), the best trial against the default run, and the
wall times; `--screenshot` saves the finished sweep page (full page, 1400 px wide).

    .venv/bin/python bench/sweep_tiny_demo.py [--trials 8] [--steps 3] [--at-once 2] [--screenshot docs/sweep-page.png]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS, LiveStudio, wait_for  # noqa: E402
from tests.browser.test_sweep import STATE  # noqa: E402

OBJECTIVE = "reward/mean"
# plotly draws parcoords with WebGL, which --disable-gpu leaves headless Chromium without: SwiftShader (software)
# draws it instead, so the screenshot shows the plot rather than "WebGL is not supported".
WEBGL_ARGS = [*(a for a in CHROMIUM_ARGS if a != "--disable-gpu"), "--use-angle=swiftshader",
              "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"]  # fmt: skip
# The experiment (the tiny demo with argv[1] steps, validation after each) and a session of its user; the
# demo's own values of the swept settings.
SETUP = """
import json, sys, django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from studio.bootstrap import TINY_EXPERIMENT_NAME, bootstrap
from studio.experiments import specs
from studio.experiments.models import Experiment
bootstrap()
user = get_user_model().objects.order_by("pk").first()
demo = Experiment.objects.get(name=TINY_EXPERIMENT_NAME)
short = {"optim": {"total_steps": int(sys.argv[1]), "prompts_per_step": 4},
         "validation": {"holdout_fraction": 0.25, "every_n_steps": 1, "at_start": False, "samples_per_prompt": 2,
                        "num_prompts": 8}}
experiment = Experiment.objects.create(team=demo.team, name=f"Tiny demo, {sys.argv[1]} steps", dataset=demo.dataset,
                                       rubric=demo.rubric, model_path=demo.model_path, preset=demo.preset,
                                       config=specs.deep_merge(demo.config, short), created_by=user)
config = experiment.spec_config()
s = SessionStore()
s[SESSION_KEY], s[BACKEND_SESSION_KEY] = str(user.pk), "django.contrib.auth.backends.ModelBackend"
s[HASH_SESSION_KEY] = user.get_session_auth_hash()
s.create()
print(json.dumps({"experiment": experiment.pk, "session": s.session_key,
                  "defaults": {"optim.lr": config["optim"]["lr"], "algorithm.group_size": config["algorithm"]["group_size"]}}))
"""
LAUNCH = """
import json, sys, django
django.setup()
from django.contrib.auth import get_user_model
from studio.experiments import services
from studio.experiments.models import Experiment
run = services.launch(Experiment.objects.get(pk=int(sys.argv[1])), get_user_model().objects.order_by("pk").first(),
                      name="default settings")
print(json.dumps({"run": run.pk}))
"""
# A run's state, wall time and objective as the sweep's driver reads it (its last point after step 0).
RUN = """
import json, sys, django
django.setup()
from studio.runs.models import Run
run = Run.objects.get(pk=int(sys.argv[1]))
last = run.metric_points.filter(key=sys.argv[2], step__gt=0).order_by("-step").values_list("step", "value").first()
took = (run.finished - run.started).total_seconds() if run.started and run.finished else None
print(json.dumps({"state": run.state, "error": run.error, "objective": last and last[1], "step": last and last[0],
                  "seconds": took}))
"""
DURATIONS = """
import json, sys, django
django.setup()
from studio.runs.models import Run
print(json.dumps({r.pk: (r.finished - r.started).total_seconds() if r.started and r.finished else None
                  for r in Run.objects.filter(pk__in=json.loads(sys.argv[1]))}))
"""


def start_sweep(page, base_url: str, experiment: int, args: argparse.Namespace) -> int:
    """The sweep launched from the experiment's "New sweep" form; its id."""
    page.goto(f"{base_url}/experiments/{experiment}/")
    page.locator("[data-new-sweep]").click()
    page.locator("[name=name]").fill("lr and group size")
    page.locator("[name=p0-name]").fill("optim.lr")
    page.locator("[name=p0-low]").fill(str(args.lr_low))
    page.locator("[name=p0-high]").fill(str(args.lr_high))
    page.locator("[name=p0-scale]").select_option("log")
    page.locator("[name=p1-name]").fill("algorithm.group_size")
    page.locator("[name=p1-low]").fill("2")
    page.locator("[name=p1-high]").fill("8")
    page.locator("[name=p1-step]").fill("2")
    page.locator("[name=sampler]").select_option("tpe")
    page.locator("[name=pruner]").select_option("median")
    page.locator("[name=objective]").fill(OBJECTIVE)
    page.locator("[name=pruner_startup_trials]").fill("1")
    page.locator("[name=max_trials]").fill(str(args.trials))
    page.locator("[name=max_concurrent]").fill(str(args.at_once))
    page.locator("[name=seed]").fill(str(args.seed))
    page.locator("[data-sweep-start]").click()
    page.wait_for_url(f"{base_url}/sweeps/*/")
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def shown(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3, help="steps of each run (validation after each)")
    parser.add_argument("--at-once", type=int, default=2, help="trials at once (the worker runs two)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr-low", type=float, default=1e-5)
    parser.add_argument("--lr-high", type=float, default=0.3)
    parser.add_argument("--screenshot", type=Path, default=None, help="save the finished sweep page here (PNG)")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"needs Debian's chromium at {CHROMIUM}")
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        studio = LiveStudio(Path(tmp)).start(worker=True)
        try:
            made = studio.script(SETUP, args.steps)
            defaults = made["defaults"]
            print(f"experiment: the tiny demo, {args.steps} steps, 4 prompts a step; defaults "
                  f"optim.lr = {shown(defaults['optim.lr'])}, algorithm.group_size = {defaults['algorithm.group_size']}",
                  flush=True)  # fmt: skip

            began = time.monotonic()
            default_run = studio.script(LAUNCH, made["experiment"])["run"]

            def ended_run():
                now = studio.script(RUN, default_run, OBJECTIVE)
                return now if now["state"] not in ("queued", "running") else None

            default = wait_for("the default run", ended_run, 30 * 60)
            default_wall = time.monotonic() - began
            if default["state"] != "succeeded":
                raise SystemExit(f"the default run ended {default['state']}: {default['error']}\n{studio.logs()}")
            print(f"default run #{default_run}: {OBJECTIVE} {default['objective']:.4f} at step {default['step']}; "
                  f"{default['seconds']:.0f} s on the worker, {default_wall:.0f} s from launch to end", flush=True)  # fmt: skip

            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=WEBGL_ARGS)
                page, errors = studio.session_page(browser, made["session"], width=1400, height=1000)
                began = time.monotonic()
                sweep_id = start_sweep(page, studio.base_url, made["experiment"], args)
                request = urllib.request.Request(f"{studio.base_url}/api/sweeps/{sweep_id}/", headers={
                    "Cookie": f"sessionid={made['session']}", "Accept": "application/json"})  # fmt: skip

                def finished():
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        sweep = json.load(answer)
                    return sweep if sweep["state"] != "active" else None

                wait_for("the sweep", finished, 90 * 60)
                sweep_wall = time.monotonic() - began
                sweep = studio.script(STATE)["sweep"]
                if args.screenshot:
                    page.wait_for_function("document.querySelector('[data-sweep-state]')?.textContent !== 'active'",
                                           timeout=60_000)  # fmt: skip
                    page.reload()
                    page.wait_for_function("document.body.dataset.sweepDrawn === '1'", timeout=60_000)
                    page.wait_for_selector("[data-sweep-parcoords] .main-svg, [data-sweep-importances] .main-svg")
                    args.screenshot.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(args.screenshot), full_page=True)
                    print(f"screenshot: {args.screenshot}", flush=True)
                browser.close()
            report(studio, sweep, sweep_wall, default, errors, args.at_once)
        finally:
            studio.stop()
    return 0


def report(studio: LiveStudio, sweep: dict, wall_s: float, default: dict, errors: list[str], at_once: int) -> None:
    trials = sweep["trials"]
    seconds = studio.script(DURATIONS, json.dumps([t["run"] for t in trials if t["run"]]))
    print(f"\nsweep #{sweep['id']}: {sweep['state']} ({sweep['ended']}); TPE + median pruning over optim.lr (log) "
          f"and algorithm.group_size; objective {OBJECTIVE} at the last step")  # fmt: skip
    print(f"{'trial':>5}  {'optim.lr':>9}  {'group':>5}  {'state':<9}  {OBJECTIVE:>11}  {'run s':>6}  why pruned")
    for t in trials:
        objective = "—" if t["objective"] is None else f"{t['objective']:.4f}"
        took = seconds.get(str(t["run"]))
        print(f"{t['number']:>5}  {shown(t['values']['optim.lr']):>9}  {t['values']['algorithm.group_size']:>5}  "
              f"{t['state']:<9}  {objective:>11}  {'—' if took is None else f'{took:.0f}':>6}  {t['pruned'] or ''}")  # fmt: skip
    pruned = [t for t in trials if t["state"] == "pruned"]
    complete = [t for t in trials if t["state"] == "complete"]
    best = max(complete, key=lambda t: t["objective"]) if complete else None
    print(f"\ntrials: {len(trials)} ({len(complete)} complete, {len(pruned)} pruned, "
          f"{sum(t['state'] == 'failed' for t in trials)} failed)")  # fmt: skip
    for t in pruned:
        print(f"  pruned: trial {t['number']} ({shown(t['values']['optim.lr'])}, group {t['values']['algorithm.group_size']}): "
              f"{t['pruned']}")  # fmt: skip
    if best is not None:
        print(f"best: trial {best['number']} (optim.lr = {shown(best['values']['optim.lr'])}, group size "
              f"{best['values']['algorithm.group_size']}) {OBJECTIVE} {best['objective']:.4f} vs the default run's "
              f"{default['objective']:.4f} ({best['objective'] - default['objective']:+.4f})")  # fmt: skip
    run_s = sum(v for v in seconds.values() if v is not None)
    print(f"wall time: sweep {wall_s:.0f} s from the click to its end ({run_s:.0f} s of trial runs, "
          f"{at_once} at once); default run {default['seconds']:.0f} s on the worker")  # fmt: skip
    print(f"page errors: {errors or 'none'}")


if __name__ == "__main__":
    sys.exit(main())
