"""What a first-time user sees on the run page: a curve's first point, an ETA from the time the
steps really take, a header on one line at 1,400 px, a group strip that scrolls, and a favicon.

Runs other than the synthetic one are made and stepped by small scripts in the studio's
environment, through the same path a worker reports on (tests/browser/synthetic_run.py)."""

import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.browser.live_studio import ROOT, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

HISTORY, TOTAL, INTERVAL = 150, 2000, 0.25
LONG_NAME = "grpo-qwen2.5-math-1.5b-gsm8k-lr1e-6-kl0.04-clip-higher-dynamic-sampling-seed-3"

# Makes a run in the synthetic run's team: `NAME STATE` -> prints its id.
NEW_RUN = """
import sys
from tests.browser.synthetic_run import Run
source = Run.objects.order_by("pk").first()
run = Run.objects.create(team=source.team, name=sys.argv[1], spec=source.spec, state=sys.argv[2],
                         total_steps=source.total_steps, created_by=source.created_by)
print(run.pk, flush=True)
"""

# A running run with every fact and action its header can show (issue 39: at 1,400 px the title shrank to
# "De…" and "Run again exactly" and "Stop run" went off-screen): an experiment with the demo's long name,
# a placement, provenance (Run again exactly) and a checkpoint (Evaluate). Prints its id.
CROWDED_RUN = """
import sys
from tests.browser.synthetic_run import Run
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from studio.runs.models import Checkpoint
source = Run.objects.order_by("pk").first()
rubric = Rubric.objects.create(team=source.team, name="sums", spec={"criteria": [{"name": "c", "kind": "exact_match"}]},
                               created_by=source.created_by)
experiment = Experiment.objects.create(team=source.team, name="Demo: SmolLM2-135M-Instruct uses a calculator",
                                       rubric=rubric, model_path="/models/smollm2", config={}, created_by=source.created_by)
run = Run.objects.create(team=source.team, experiment=experiment, name=sys.argv[1], spec=source.spec, state="running",
                         total_steps=source.total_steps, created_by=source.created_by, last_step=5,
                         placement="1 process · cpu (2 threads)", provenance={"data": {"sha256": "0" * 64}})
Checkpoint.objects.create(run=run, step=5, path="/ck/demo/step-5")
print(run.pk, flush=True)
"""

# Starts run RUN_ID as if its model took LOAD_S seconds to load (prints "ready <start time>"), then
# reports one step per line read ("<step>"), or a log line ("log <text>"), printing the time it reported at.
STEPPER = """
import random, sys, time
from datetime import timedelta
from tests.browser.synthetic_run import Run, report_step, timezone
from studio.runs.events import record
run_id, load_s = int(sys.argv[1]), float(sys.argv[2])
started = timezone.now() - timedelta(seconds=load_s)
Run.objects.filter(pk=run_id).update(state="running", started=started)
run, rng = Run.objects.get(pk=run_id), random.Random(5)
print("ready", started.timestamp(), flush=True)
for line in sys.stdin:
    now = time.time()
    if line.startswith("log "):
        record(run_id, [("log", None, {"line": line[4:].strip()})])
    else:
        report_step(run, int(line), run.total_steps, rng, now)
    print(now, flush=True)
"""

# Stands for a worker on the runs' queue busy with another run (`start`), then gone (`stop`): the row a
# worker writes when it starts (studio.fleet.models.WorkerNode); no worker process runs in this studio.
BUSY_WORKER = """
import sys
from tests.browser.synthetic_run import Run
from studio.fleet.models import WorkerNode
source = Run.objects.order_by("pk").first()
if sys.argv[1] == "start":
    WorkerNode.record_start("busy@host", ["gpu"], [], 1)
    Run.objects.create(team=source.team, name="ahead", spec=source.spec, state="running", worker="busy@host",
                       total_steps=source.total_steps, created_by=source.created_by)
else:
    WorkerNode.record_stop("busy@host")
    Run.objects.filter(name="ahead").update(state="succeeded")
"""


@pytest.fixture(scope="module")
def live_run(studio):
    with studio.synthetic_run(HISTORY, TOTAL, INTERVAL) as run:
        yield run


def new_run(studio, name: str, state: str = "queued", script: str = NEW_RUN) -> int:
    done = subprocess.run(
        [sys.executable, "-c", script, name, state], cwd=ROOT, env=studio.env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@contextmanager
def stepping(studio, run_id: int, load_s: float):
    """STEPPER on run `run_id`, started as if its model took `load_s` to load: yields (`send(line)`, which
    reports a step ("<step>") or a log line ("log <text>") and returns the time it reported at; the run's start)."""
    stepper = subprocess.Popen([sys.executable, "-c", STEPPER, str(run_id), str(load_s)], cwd=ROOT, env=studio.env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip

    def send(line: str) -> float:
        stepper.stdin.write(line + "\n")
        stepper.stdin.flush()
        return float(stepper.stdout.readline())

    try:
        ready, started = stepper.stdout.readline().split()
        assert ready == "ready"
        yield send, float(started)
    finally:
        stepper.stdin.close()
        stepper.wait(timeout=10)


def open_page(browser, studio, live_run, run_id, width=1366, height=768):
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_cookies([{"name": "sessionid", "value": live_run["session"], "url": studio.base_url}])
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    failed = []
    page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
    page.goto(f"{studio.base_url}/runs/{run_id}/")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return page, errors, failed


def eta_seconds(page) -> float | None:
    """The header's ETA ("1h 02m", "8m 06s", "42s") in seconds; None while it shows none."""
    text = page.text_content("[data-run-eta]")
    parts = re.findall(r"(\d+)([hms])", text)
    return sum(int(n) * {"h": 3600, "m": 60, "s": 1}[unit] for n, unit in parts) if parts else None


def keep_screenshot(path: Path) -> None:
    target = os.environ.get("RUN_PAGE_SCREENSHOTS")
    if target:
        shutil.copy(path, Path(target) / path.name)


def test_the_first_point_shows_as_a_marker_and_the_eta_leaves_the_model_load_out(browser, studio, live_run, tmp_path):
    run_id = new_run(studio, "first-steps")
    with stepping(studio, run_id, 30) as (send, started):
        page, errors, _ = open_page(browser, studio, live_run, run_id)
        assert page.text_content("[data-run-eta]") == "–"  # no step measured: no guess
        first = send("1")
        chart = "document.querySelector('[data-panel=reward] .chart')"
        page.wait_for_function(f"{chart}?.data?.[0]?.x?.length === 1", timeout=10_000)
        line = page.evaluate(f"{chart}.data.find((t) => t.name === 'reward/mean')")
        assert line["mode"] == "markers" and line["y"] and line["marker"]["size"] > 0
        assert page.locator("[data-panel=reward] .scatterlayer .point").count() >= 1  # drawn, not only listed
        # Its axis is the step ± 0.5 with the one tick "1" (plotly's own: 0..2 ticked in halves; -1..1 at step 0).
        assert page.evaluate(f"{chart}._fullLayout.xaxis.range") == [0.5, 1.5]
        assert page.locator("[data-panel=reward] .xtick text").all_text_contents() == ["1"]
        shot = tmp_path / "run-page-first-point.png"
        page.locator("[data-panel=reward]").screenshot(path=str(shot))
        keep_screenshot(shot)
        # Step 1 alone: its time includes the 30 s load, and it is all there is to go by.
        assert eta_seconds(page) == pytest.approx((TOTAL - 1) * (first - started), rel=0.05)

        time.sleep(1)
        second = send("2")
        page.wait_for_function(f"{chart}.data.find((t) => t.name === 'reward/mean').x.length === 2", timeout=10_000)
        # Two points: a line with its points marked (marks stay while a series has few points), integer ticks.
        page.wait_for_function(f"{chart}.data.find((t) => t.name === 'reward/mean').mode === 'lines+markers'")
        ticks = page.locator("[data-panel=reward] .xtick text").all_text_contents()
        assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks
        # Step 2 took `second - first`: the load is left out from here on.
        page.wait_for_function("document.querySelector('[data-run-step]').textContent.startsWith('2')")
        assert eta_seconds(page) == pytest.approx((TOTAL - 2) * (second - first), rel=0.1)
        assert not errors, errors
        page.context.close()


def test_until_its_first_step_a_started_run_shows_its_latest_log_line_in_the_header(browser, studio, live_run):
    """The minutes a model load or a cold start take: the header says what the run is doing, not just
    "running"; from the first step on it says nothing there (the log panel keeps every line)."""
    run_id = new_run(studio, "cold-start")
    with stepping(studio, run_id, 5) as (send, _):
        send("log loading the model from /models/smollm2")
        page, errors, _ = open_page(browser, studio, live_run, run_id)
        detail = page.locator("[data-run-detail]")
        assert detail.text_content() == "loading the model from /models/smollm2"  # from the page's log tail
        assert detail.is_visible() and "note" in detail.get_attribute("class")  # muted: not an error's red
        send("log cold start: step 3 of 8, loss 1.234")
        page.wait_for_function(
            "document.querySelector('[data-run-detail]').textContent === 'cold start: step 3 of 8, loss 1.234'",
            timeout=10_000,
        )
        send("1")
        page.wait_for_function("document.querySelector('[data-run-detail]').textContent === ''", timeout=10_000)
        send("log step 1 took 4.2 s")
        page.wait_for_function(
            "document.querySelector('[data-log-tail]').textContent.includes('step 1 took 4.2 s')", timeout=10_000
        )
        assert detail.text_content() == ""
        assert not errors, errors
        page.context.close()


def test_after_the_first_step_the_header_says_how_far_the_steps_sampling_is_until_its_metrics(
    browser, studio, live_run
):
    """A long step's sampling (trainers.rollout.progress logs how far it is): its latest line shows under
    the header, as text, until the step's metrics arrive; other log lines do not show there."""
    run_id = new_run(studio, "slow-steps")
    with stepping(studio, run_id, 5) as (send, _):
        send("1")
        page, errors, _ = open_page(browser, studio, live_run, run_id)
        detail = page.locator("[data-run-detail]")
        assert detail.text_content() == ""
        line = "step 2: sampled 24 of 64 completions, the batch at token 120 of 256 (31 s)"
        send(f"log {line}")
        page.wait_for_function(f"document.querySelector('[data-run-detail]').textContent === {line!r}", timeout=10_000)
        assert "note" in detail.get_attribute("class")
        send("log step 2 <b>took</b> long")  # not a sampling line: the header keeps the count
        page.wait_for_function(
            "document.querySelector('[data-log-tail]').textContent.includes('step 2 <b>took</b> long')",
            timeout=10_000,
        )
        assert detail.text_content() == line
        send("2")
        page.wait_for_function("document.querySelector('[data-run-detail]').textContent === ''", timeout=10_000)
        send("log validation after step 2: sampled 3 of 8 completions (6 s)")
        page.wait_for_function(
            "document.querySelector('[data-run-detail]').textContent.startsWith('validation after step 2: sampled 3')",
            timeout=10_000,
        )
        page.context.close()
        # Opened again: the log's last line is a sampling line, so the header shows it from the start.
        page, errors_again, _ = open_page(browser, studio, live_run, run_id)
        shown = page.text_content("[data-run-detail]")
        assert shown == "validation after step 2: sampled 3 of 8 completions (6 s)"
        assert not errors and not errors_again, errors + errors_again
        page.context.close()


def test_a_queued_run_says_what_it_waits_behind_and_follows_the_fleet(browser, studio, live_run):
    """No worker on the runs' queue, then one busy with another run: the header says which, read again
    while the run waits (nothing on the run's own stream tells of a worker starting)."""
    run_id = new_run(studio, "waiting")
    page, errors, _ = open_page(browser, studio, live_run, run_id)
    detail = page.locator("[data-run-detail]")
    assert detail.text_content().startswith("waiting for a worker: none serving the 'gpu' queue is running (")
    assert "./studioctl worker --queues gpu" in detail.text_content()
    assert "note" in detail.get_attribute("class")  # muted: waiting is not an error
    busy = subprocess.run([sys.executable, "-c", BUSY_WORKER, "start"], cwd=ROOT, env=studio.env, capture_output=True,
                          text=True)  # fmt: skip
    try:
        assert busy.returncode == 0, busy.stderr
        page.wait_for_function(
            "document.querySelector('[data-run-detail]').textContent.startsWith('waiting for a free worker')",
            timeout=30_000,  # the page reads it again every 10 s; the row counts as online for 30 s
        )
        said = "waiting for a free worker: the 'gpu' queue's 1 place (busy@host) is taken by 1 running run"
        assert detail.text_content().startswith(said), detail.text_content()
        assert re.match(r" \(#\d+ ahead\)", detail.text_content()[len(said) :]), detail.text_content()  # its team's
        assert not errors, errors
        page.context.close()
    finally:
        subprocess.run([sys.executable, "-c", BUSY_WORKER, "stop"], cwd=ROOT, env=studio.env, check=True)


def test_the_eta_of_a_live_run_follows_its_measured_step_time(browser, studio, live_run):
    page, errors, _ = open_page(browser, studio, live_run, live_run["run"])
    page.wait_for_function("document.querySelector('[data-run-eta]').textContent !== '–'", timeout=15_000)
    # The pace the run really keeps, as the test sees it over a few seconds.
    step_before, t_before = page.evaluate("studioRunPage.progress.run.last_step"), time.time()
    time.sleep(5)
    step, t_after = page.evaluate("studioRunPage.progress.run.last_step"), time.time()
    per_step = (t_after - t_before) / (step - step_before)
    eta = eta_seconds(page)
    print(f"\nETA at step {step}: {eta} s; the run's pace says {(TOTAL - step) * per_step:.0f} s")
    assert eta == pytest.approx((TOTAL - step) * per_step, rel=0.3)
    assert not errors, errors
    page.context.close()


def test_the_header_stays_on_one_line_at_1400_px_with_a_long_name(browser, studio, live_run, tmp_path):
    run_id = new_run(studio, LONG_NAME)
    page, errors, _ = open_page(browser, studio, live_run, run_id, 1400, 900)
    head = page.locator(".run-head")
    button = page.locator("[data-cancel-run]")
    assert button.is_visible() and page.locator(".run-head .actions a", has_text="Compare").is_visible()
    # one line: no taller than its tallest item (the buttons), and every item on the same row
    assert head.bounding_box()["height"] <= button.bounding_box()["height"] + 8
    tops = page.evaluate(
        "[...document.querySelector('.run-head').children].map((el) => el.getBoundingClientRect().top)"
    )
    assert max(tops) - min(tops) < 12, tops
    name = page.locator("[data-run-name]")
    assert name.get_attribute("title") == LONG_NAME  # cut short on screen, whole on hover
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    shot = tmp_path / "run-page-header-1400.png"
    page.screenshot(path=str(shot), clip={"x": 0, "y": 0, "width": 1400, "height": 160})
    keep_screenshot(shot)
    assert not errors, errors
    page.context.close()


def test_every_header_action_is_reachable_at_1280_and_1400_px(browser, studio, live_run, tmp_path):
    run_id = new_run(studio, "Demo: SmolLM2-135M-Instruct uses a calculator · 3", script=CROWDED_RUN)
    for width in (1280, 1400):
        page, errors, _ = open_page(browser, studio, live_run, run_id, width, 900)
        shown = page.locator(".run-head .actions > :visible")
        names = shown.all_text_contents()
        assert {"Evaluate checkpoint", "Clone", "Run again exactly", "Stop run"} <= set(names), names
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), width
        for box in (el.bounding_box() for el in shown.all()):
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, names, box)
        # The title keeps a readable part (it had shrunk to "De…"): at least 16 characters' room.
        assert page.locator("[data-run-name]").bounding_box()["width"] >= 16 * 12, width
        assert page.locator(".run-head .facts a", has_text="Demo: SmolLM2").bounding_box()["x"] + 10 <= width
        shot = tmp_path / f"run-page-header-actions-{width}.png"
        page.screenshot(path=str(shot), clip={"x": 0, "y": 0, "width": width, "height": 200})
        keep_screenshot(shot)
        assert not errors, errors
        page.context.close()


def test_the_group_strip_scrolls_inside_the_rollout_detail(browser, studio, live_run, tmp_path):
    page, errors, _ = open_page(browser, studio, live_run, live_run["run"], 1400, 900)
    page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_selector(".rollout-detail .siblings .sibling")
    strip = page.evaluate(
        """(() => {
          const s = document.querySelector('.rollout-detail .siblings');
          s.scrollLeft = 0;
          s.scrollLeft = 200;
          return { scrollWidth: s.scrollWidth, width: s.clientWidth, moved: s.scrollLeft > 0,
                   detail: document.querySelector('.rollout-detail').clientWidth };
        })()"""
    )
    assert strip["scrollWidth"] > strip["width"] and strip["moved"], strip
    assert strip["width"] <= strip["detail"]  # the strip scrolls, the detail does not widen
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    page.locator(".rollout-detail .siblings").scroll_into_view_if_needed()
    shot = tmp_path / "run-page-group-strip-1400.png"
    page.screenshot(path=str(shot))
    keep_screenshot(shot)
    assert not errors, errors
    page.context.close()


def test_the_favicon_is_served_and_the_page_loads_nothing_missing(browser, studio, live_run):
    page, errors, failed = open_page(browser, studio, live_run, live_run["run"])
    href = page.get_attribute("link[rel=icon]", "href")
    response = page.request.get(studio.base_url + href)
    assert response.status == 200 and response.headers["content-type"].startswith("image/svg+xml")
    assert b"<svg" in response.body()
    assert not failed, failed
    assert not errors, errors
    page.context.close()
