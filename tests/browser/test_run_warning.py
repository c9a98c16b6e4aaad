"""A warning the trainer reports while the run page is open (a criterion failing on most
rollouts) appears as a banner under the run's header at once, through the real websocket."""

import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

MESSAGE = "criterion 'broken' failed on 100% of step 3's rollouts; last error: KeyError: 'missing'"
# What the worker's reporter does for a warning: the event and the run's latest warning, in one write.
WARN = """
import sys, django
django.setup()
from django.db import transaction
from studio.runs.events import record
from studio.runs.models import Run
run_id, message = int(sys.argv[1]), sys.argv[2]
with transaction.atomic():
    Run.objects.filter(pk=run_id).update(warning=message)
    record(run_id, [("warning", 3, {"message": message})])
"""


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

    subprocess.run([sys.executable, "-c", WARN, str(quiet_run["run"]), MESSAGE], cwd=ROOT, env=studio.env, check=True)
    banner = page.locator("[data-run-warning]")
    banner.wait_for(state="visible", timeout=10_000)
    assert banner.inner_text() == f"⚠ {MESSAGE}"

    page.reload()
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert page.locator("[data-run-warning]").inner_text() == f"⚠ {MESSAGE}"
    assert errors == []
    context.close()
