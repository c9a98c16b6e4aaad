"""An evaluation suite of two tasks on three checkpoints of a real run of the real model plus the base model,
driven through the browser as a person would (issue 40's full check; too slow for the test suite on a CPU).

It starts a studio of its own (daphne, a Celery worker on the default and gpu queues, a private Redis, a
SQLite file in a temp folder) with the demos `./studioctl up` makes, trains the real demo (SmolLM2-135M-
Instruct answering sums, trainers.demos.real) for `--steps` steps with a checkpoint every step, then in
Debian's Chromium: writes a suite ("sums" on the demo's sums, "words" on the calculator demo's word problems,
both scored by the sums rubric, k samples of `--prompts` prompts each), launches it on the base model and
every checkpoint, waits for the table, checks that each cell opens the samples of its own (model, task) pair
only, and prints the table with its intervals and the wall time of each phase.

    .venv/bin/python bench/suite_real_checkpoints.py [--steps 3] [--prompts 16] [--k 4] [--screenshot docs/suite-results.png]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS, LiveStudio, wait_for  # noqa: E402

# The real demo launched with `overrides` (a checkpoint every step, no validation to wait for); prints the
# run's id, the demo's model folder and a session of the user who launched it.
LAUNCH = """
import json, sys, django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from studio.bootstrap import bootstrap, real_model_path
from studio.experiments import services
from studio.experiments.models import Experiment
from trainers.demos import real
bootstrap()
user = get_user_model().objects.order_by("pk").first()
run = services.launch(Experiment.objects.get(name=real.EXPERIMENT_NAME), user, overrides=json.loads(sys.argv[1]))
s = SessionStore()
s[SESSION_KEY], s[BACKEND_SESSION_KEY] = str(user.pk), "django.contrib.auth.backends.ModelBackend"
s[HASH_SESSION_KEY] = user.get_session_auth_hash()
s.create()
print(json.dumps({"run": run.pk, "session": s.session_key, "model": str(real_model_path())}))
"""
STATE = """
import json, sys, django
django.setup()
from studio.runs.models import Run
run = Run.objects.get(pk=int(sys.argv[1]))
print(json.dumps({"state": run.state, "last_step": run.last_step, "error": run.error,
                  "checkpoints": sorted(run.checkpoints.values_list("step", flat=True))}))
"""
SUITE_RUN = """
import json, sys, django
django.setup()
from studio.evaluations.models import SuiteRun
r = SuiteRun.objects.order_by("-pk").first()
print(json.dumps({"id": r.pk if r else None, "state": r.state if r else None,
                  "cells": [[x.model_label, x.task, x.run_id] for x in r.results.all()] if r else []}))
"""


def write_suite(page, base_url: str, args: argparse.Namespace) -> None:
    page.goto(f"{base_url}/suites/new/")
    page.locator("input[name=name]").fill("sums and words")
    page.locator("input[name=max_new_tokens]").fill(str(args.max_tokens))
    page.locator("input[name=temperature]").fill("1.0")
    page.locator("input[name=seed]").fill("0")
    tasks = (("sums", "Small sums"), ("words", "Calculator arithmetic"))
    for i, (name, dataset) in enumerate(tasks):
        page.locator(f"input[name=task-{i}-name]").fill(name)
        page.locator(f"select[name=task-{i}-dataset]").select_option(label=dataset)
        page.locator(f"select[name=task-{i}-rubric]").select_option(label="Right number, alone")
        page.locator(f"input[name=task-{i}-samples_per_prompt]").fill(str(args.k))
        page.locator(f"input[name=task-{i}-num_prompts]").fill(str(args.prompts))
        if i == 0:  # the empty row adds one: save to get the next
            page.get_by_role("button", name="Save suite").click()
            page.wait_for_url("**/suites/*/")
    page.get_by_role("button", name="Save suite").click()
    page.wait_for_load_state()
    errors = page.locator("[data-errors]")
    if errors.count():
        raise SystemExit(f"the suite form refused: {errors.inner_text()}")


def launch_suite(page, model: str) -> None:
    page.get_by_role("link", name="Launch on checkpoints…").click()
    page.locator("textarea[name=base_models]").fill(model)
    boxes = page.locator("input[name=checkpoints]")
    for i in range(boxes.count()):
        boxes.nth(i).check()
    page.get_by_role("button", name="Launch").click()
    page.wait_for_load_state()
    if "/suite-runs/" not in page.url:
        errors = page.locator("[data-errors]")
        raise SystemExit(f"the launch form refused: {errors.inner_text() if errors.count() else page.url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="demo steps, one checkpoint each")
    parser.add_argument("--group-size", type=int, help="completions per prompt in training (default: the demo's)")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per task")
    parser.add_argument("--k", type=int, default=4, help="samples per prompt")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--screenshot", type=Path, help="also write the result page's PNG here")
    args = parser.parse_args()

    from trainers.models.pretrained import SMOLLM2, install

    with tempfile.TemporaryDirectory() as tmp:
        # the studio's demo folder (DATA_DIR/demo) holds the real model, as setup leaves it in a checkout's var/
        shutil.copytree(install(SMOLLM2, ROOT / "var" / "demo"), Path(tmp) / "demo" / SMOLLM2.name)
        studio = LiveStudio(Path(tmp)).start(worker=True)
        try:
            started = time.monotonic()
            overrides = {"optim": {"total_steps": args.steps}, "checkpoint": {"every_n_steps": 1, "keep_last": args.steps},
                         "validation": {"every_n_steps": 1000, "at_start": False}}  # fmt: skip
            if args.group_size:
                overrides["algorithm"] = {"group_size": args.group_size}
            launched = studio.script(LAUNCH, json.dumps(overrides))

            def trained():
                now = studio.script(STATE, launched["run"])
                if now["state"] in ("failed", "cancelled"):
                    raise SystemExit(f"the demo run ended {now['state']}: {now['error']}")
                return now if now["state"] == "succeeded" else None

            run = wait_for("the demo run", trained, 90 * 60, every_s=10)
            train_s = time.monotonic() - started
            print(f"trained: run #{launched['run']}, {run['last_step']} steps, checkpoints at {run['checkpoints']}, "
                  f"{train_s / 60:.1f} min", flush=True)  # fmt: skip

            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page, errors = studio.session_page(browser, launched["session"], width=1400, height=1000)
                write_suite(page, studio.base_url, args)
                launch_suite(page, launched["model"])
                suite_started = time.monotonic()

                def scored():
                    now = studio.script(SUITE_RUN)
                    if now["state"] in ("failed", "cancelled"):
                        raise SystemExit(f"the suite run ended {now['state']}:\n{studio.logs()[-4000:]}")
                    return now if now["state"] == "succeeded" else None

                suite_run = wait_for("the suite run", scored, 90 * 60, every_s=10)
                suite_s = time.monotonic() - suite_started
                page.reload()
                page.wait_for_selector("[data-suite-heatmap] .main-svg", timeout=60_000)
                rows = page.locator("[data-suite-table] tbody tr")
                models = [rows.nth(i).get_attribute("data-model") for i in range(rows.count())]
                print(f"suite run #{suite_run['id']}: {len(models)} models x 2 tasks in {suite_s / 60:.1f} min")
                for i, label in enumerate(models):
                    for task in ("sums", "words"):
                        cell = rows.nth(i).locator(f'td[data-task="{task}"]')
                        text = " ".join(cell.inner_text().split())
                        print(f"  {label:>12} {task:>6}: {text}")
                if args.screenshot:
                    page.screenshot(path=str(args.screenshot), full_page=True)
                # each cell opens its own pair's evaluation run and nothing else
                cells = {(label, task): run_id for label, task, run_id in suite_run["cells"]}
                checked = 0
                for i, label in enumerate(models):
                    for task in ("sums", "words"):
                        page.goto(f"{studio.base_url}/suite-runs/{suite_run['id']}/")
                        page.locator(f'[data-suite-table] tbody tr:nth-child({i + 1}) td[data-task="{task}"] '
                                     "[data-cell-link]").click()  # fmt: skip
                        page.wait_for_url(f"**/runs/{cells[(label, task)]}/**")
                        page.wait_for_selector("tr[data-rollout-id]", timeout=60_000)
                        checked += 1
                print(f"{checked} cells each opened their own evaluation run's samples; page errors: {errors or 'none'}")
                browser.close()
            print(f"wall time: {(time.monotonic() - started) / 60:.1f} min (train {train_s / 60:.1f}, "
                  f"suite {suite_s / 60:.1f})")  # fmt: skip
        finally:
            studio.stop()


if __name__ == "__main__":
    main()
