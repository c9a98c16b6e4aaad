"""A warning the trainer reports while the run page is open (a criterion failing on most
rollouts) appears as a banner under the run's header at once, through the real websocket; two at one
step both show, and a later step's warning replaces them, live and after a reload."""

import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

MESSAGE = "criterion 'broken' failed on 100% of step 3's rollouts; last error: KeyError: 'missing'"
SECOND = "in 3 steps no group's rewards differed: a step learns only from differences between the samples"
LATER = "3 of 4 episodes at step 4 wrote a tool call that the turn's token limit cut into malformed JSON"
# What the worker's reporter does for a warning (studio.runs.reports.write: the run's warnings and the event),
# in one transaction.
WARN = """
import sys, django
django.setup()
from django.db import transaction
from studio.runs import reports
from studio.runs.events import record
run_id, step, message = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with transaction.atomic():
    record(run_id, [reports.write(run_id, "warning", step, {"message": message})])
"""


def warn(studio, run: dict, step: int, message: str) -> None:
    subprocess.run([sys.executable, "-c", WARN, str(run["run"]), str(step), message], cwd=ROOT, env=studio.env,
                   check=True)  # fmt: skip


@pytest.fixture(scope="module")
def quiet_run(studio):
    """A run with a few steps of history and no live traffic (TOTAL = HISTORY)."""
    with studio.synthetic_run(3, 3, 0.5) as run:
        yield run


def test_a_live_warning_shows_as_a_banner_and_stays_after_a_reload(browser, studio, quiet_run):
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": quiet_run["session"], "url": studio.base_url}])
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{studio.base_url}/runs/{quiet_run['run']}/")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    # Connected: the feeder has marked the run succeeded already, so its live mark says "finished".
    page.wait_for_selector("[data-live-state].live-finished", timeout=15_000)
    assert page.locator("[data-run-warning]").is_hidden()

    warn(studio, quiet_run, 3, MESSAGE)
    banner = page.locator("[data-run-warning]")
    banner.wait_for(state="visible", timeout=10_000)
    assert banner.inner_text() == f"⚠ {MESSAGE}"

    page.reload()
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert page.locator("[data-run-warning]").inner_text() == f"⚠ {MESSAGE}"

    # A second check fires at the same step: both show, one a line (the page had shown only the latest).
    warn(studio, quiet_run, 3, SECOND)
    lines = page.locator("[data-run-warning] [data-run-warning-text]")
    page.wait_for_function("document.querySelectorAll('[data-run-warning-text]').length === 2", timeout=10_000)
    assert lines.all_inner_texts() == [MESSAGE, SECOND]
    page.reload()
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert lines.all_inner_texts() == [MESSAGE, SECOND]
    # A later step's warning replaces them.
    warn(studio, quiet_run, 4, LATER)
    page.wait_for_function("document.querySelectorAll('[data-run-warning-text]').length === 1", timeout=10_000)
    assert lines.all_inner_texts() == [LATER]
    assert errors == []
    context.close()
