"""A team's usage page (issue 41) in a real browser, on runs written by the test (no training, no worker; the
module's studio of tests/browser/conftest.py, with prices set as an operator sets them):

    run   by     experiment   launched     device-s   GPU-s   generated   trained
    a     alice  Exp          2026-09-10   3600       3600    1000        3000
    b     alice  Exp          2026-10-10   7200       0       500         1500
    c     bob    Exp two      2026-10-31   1800       1800    200         600

At 2 EUR a GPU-hour and 0.5 EUR a CPU-hour: a costs 2.00, b 1.00, c 1.00; in all 12600 s = 3.50 h, 4.00 EUR.
From the teams page to the usage page; the months filter typed in keeps October alone: b and c, 9000 s = 2.50 h,
2.00 EUR, alice 1.00 and bob 1.00."""

from __future__ import annotations

import pytest

from tests.browser.live_studio import LiveStudio, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]
PASSWORD = "usage-page-pw-1"

SETUP = f"""
from datetime import datetime, timezone
from django.contrib.auth import get_user_model
from studio.accounts.models import EDITOR, OWNER, Team
from studio.datasets.models import Dataset
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from studio.runs.models import Run
users = get_user_model().objects
alice = users.create_user("alice", password="{PASSWORD}")
bob = users.create_user("bob", password="{PASSWORD}")
team = Team.objects.create(name="ml-a")
team.add_member(alice, OWNER)
team.add_member(bob, EDITOR)
data = Dataset.objects.create(team=team, name="d", source="server_file", path="/nowhere.jsonl", format="jsonl")
rubric = Rubric.objects.create(team=team, name="r", spec={{"criteria": []}})
exps = [Experiment.objects.create(team=team, name=n, dataset=data, rubric=rubric, model_path="/m", config={{}})
        for n in ("Exp", "Exp two")]
rows = [("a", alice, exps[0], (2026, 9, 10), 3600.0, 3600.0, 1000, 3000),
        ("b", alice, exps[0], (2026, 10, 10), 7200.0, 0.0, 500, 1500),
        ("c", bob, exps[1], (2026, 10, 31), 1800.0, 1800.0, 200, 600)]
for name, who, exp, day, device, gpu, generated, trained in rows:
    run = Run.objects.create(team=team, experiment=exp, name=name, spec={{}}, state="succeeded", created_by=who,
                             device_seconds=device, gpu_seconds=gpu, tokens_generated=generated,
                             tokens_trained=trained)
    Run.objects.filter(pk=run.pk).update(created=datetime(*day, 12, tzinfo=timezone.utc))
"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    live = LiveStudio(tmp_path_factory.mktemp("usage-studio"))
    prices = {"STUDIO_GPU_HOUR_PRICE": "2", "STUDIO_CPU_HOUR_PRICE": "0.5", "STUDIO_PRICE_CURRENCY": "EUR"}
    with pytest.MonkeyPatch.context() as patch:  # the studio's processes read them from their environment
        for name, value in prices.items():
            patch.setenv(name, value)
        live.start(worker=False)
    live.shell(SETUP)
    yield live
    live.stop()


def cells(page, table: str) -> dict[str, tuple[str, str]]:
    """{row label: (device time, cost)} of one of the page's tables."""
    rows = page.locator(f"[data-usage-table='{table}'] [data-usage-row]")
    return {
        rows.nth(i).get_attribute("data-usage-row"): (
            rows.nth(i).locator("[data-device]").inner_text(),
            rows.nth(i).locator("[data-cost]").inner_text(),
        )
        for i in range(rows.count())
    }


def test_the_usage_page_sums_per_user_experiment_and_month_and_filters_by_month(browser, studio):
    page, errors = studio.signed_in_page(browser, "bob", PASSWORD)
    page.goto(f"{studio.base_url}/teams/")
    page.locator("[data-team-usage]").click()
    page.wait_for_selector("[data-usage-total]")
    assert page.locator("[data-total-device]").inner_text() == "3.50 h"
    assert page.locator("[data-total-cost]").inner_text() == "4.00 EUR"
    assert page.locator("[data-total-generated]").inner_text() == "1,700"
    assert cells(page, "user") == {"alice": ("3.00 h", "3.00 EUR"), "bob": ("30.0 min", "1.00 EUR")}
    assert cells(page, "experiment") == {"Exp": ("3.00 h", "3.00 EUR"), "Exp two": ("30.0 min", "1.00 EUR")}
    assert cells(page, "month") == {"2026-09": ("1.00 h", "2.00 EUR"), "2026-10": ("2.50 h", "2.00 EUR")}

    page.get_by_label("From").fill("2026-10")
    page.get_by_label("To").fill("2026-10")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**/usage/?from=2026-10&to=2026-10")
    assert page.locator("[data-total-device]").inner_text() == "2.50 h"
    assert page.locator("[data-total-cost]").inner_text() == "2.00 EUR"
    assert cells(page, "user") == {"alice": ("2.00 h", "1.00 EUR"), "bob": ("30.0 min", "1.00 EUR")}
    assert errors == []
