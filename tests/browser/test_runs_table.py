"""The runs table (issue 41, "many runs at a glance") in a real browser, on runs written by the test (no training,
no worker; the module's studio of tests/browser/conftest.py):

- a metric column sorted from its header, best first, then the other way;
- a filter on a setting typed into the form, kept in the link, dropped from its chip;
- three seed repeats grouped as one row whose mean and spread are checked by hand, its runs shown under it;
- three rows selected and compared: their curves overlaid, the settings table showing only the seed (the one
  setting that differs), and the three drawn as one band whose mean, min and max are checked by hand.

The runs (alice's team):           optim.lr   optim.seed   reward/mean at steps 1, 2, 3
    repeat-1                       1e-3       1            0.1  0.5  0.5
    repeat-2                       1e-3       2            0.3  0.9  0.7
    repeat-3                       1e-3       3            0.2  0.6  0.9
    low-lr                         1e-4       1            0.0  0.1  0.2
    mid-lr                         3e-4       1            0.5  0.8  0.95
The repeats' last values 0.5, 0.7, 0.9: mean 0.7, sample std sqrt((0.04 + 0 + 0.04) / 2) = 0.2, n 3. Their band:
mean 0.2, 0.6667, 0.7 by step; min 0.1, 0.5, 0.5; max 0.3, 0.9, 0.9."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.live_studio import ROOT, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

SETUP = """
import json, time
import django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from studio.accounts.models import OWNER, Team
from studio.runs.models import MetricPoint, Run

alice = get_user_model().objects.create_user("alice", password="pw-alice-123")
team = Team.objects.create(name="Reasoning")
team.add_member(alice, OWNER)
runs = {"repeat-1": (1e-3, 1, [0.1, 0.5, 0.5]), "repeat-2": (1e-3, 2, [0.3, 0.9, 0.7]),
        "repeat-3": (1e-3, 3, [0.2, 0.6, 0.9]), "low-lr": (1e-4, 1, [0.0, 0.1, 0.2]), "mid-lr": (3e-4, 1, [0.5, 0.8, 0.95])}
ids = {}
for name, (lr, seed, rewards) in runs.items():
    spec = {"model": {"path": "/models/tiny"}, "optim": {"lr": lr, "seed": seed, "total_steps": 3}}
    run = Run.objects.create(team=team, name=name, spec=spec, state="succeeded", last_step=3, total_steps=3,
                             created_by=alice)
    MetricPoint.objects.bulk_create(MetricPoint(run=run, step=s, key="reward/mean", value=v, wall_time=time.time() + s)
                                    for s, v in enumerate(rewards, start=1))
    ids[name] = run.pk
s = SessionStore()
s[SESSION_KEY], s[BACKEND_SESSION_KEY] = str(alice.pk), "django.contrib.auth.backends.ModelBackend"
s[HASH_SESSION_KEY] = alice.get_session_auth_hash()
s.create()
print(json.dumps({"session": s.session_key, "ids": ids}))
"""


@pytest.fixture(scope="module")
def world(studio):
    done = subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=studio.env, check=True, capture_output=True,
                          text=True)  # fmt: skip
    return json.loads(done.stdout)


@pytest.fixture
def page(browser, studio, world):
    context = browser.new_context(viewport={"width": 1500, "height": 950})
    context.add_cookies([{"name": "sessionid", "value": world["session"], "url": studio.base_url}])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    yield page
    context.close()
    assert errors == []


def open_table(page, studio, query: str = "") -> None:
    page.goto(f"{studio.base_url}/runs/{query}")
    page.wait_for_selector("[data-runs-table][data-ready='1']")


def row_names(page) -> list[str]:
    return page.locator("tr[data-run-row]:not([hidden]) [data-run-name]").all_inner_texts()


def column_cells(page, rows: str = "tr[data-run-row]") -> list[str]:
    return page.locator(f"{rows} [data-cell]").all_inner_texts()


def test_a_metric_column_sorts_from_its_header(page, studio):
    open_table(page, studio, "?col=last:reward/mean")
    assert set(row_names(page)) == {"repeat-1", "repeat-2", "repeat-3", "low-lr", "mid-lr"}
    page.click("th[data-column='last:reward/mean'] [data-sort-link]")
    page.wait_for_selector("[data-sort-arrow]")
    assert row_names(page) == ["mid-lr", "repeat-3", "repeat-2", "repeat-1", "low-lr"]  # best (highest) first
    assert column_cells(page) == ["0.95", "0.9", "0.7", "0.5", "0.2"]
    assert page.inner_text("[data-sort-arrow]") == "▼"
    page.click("th[data-column='last:reward/mean'] [data-sort-link]")
    page.wait_for_function("document.querySelector('[data-sort-arrow]').textContent === '▲'")
    assert row_names(page) == ["low-lr", "repeat-1", "repeat-2", "repeat-3", "mid-lr"]


def test_a_filter_on_a_setting(page, studio):
    open_table(page, studio, "?col=set:optim.lr&col=set:optim.seed")
    page.fill("[data-filter-path]", "optim.lr")
    page.fill("[data-filter-value]", "1e-3")
    page.click("[data-table-apply]")
    page.wait_for_selector("[data-filter-chip]")
    assert parse_qs(urlparse(page.url).query)["set.optim.lr"] == ["1e-3"]  # the view is a link
    assert sorted(row_names(page)) == ["repeat-1", "repeat-2", "repeat-3"]
    assert sorted(column_cells(page)) == ["0.001", "0.001", "0.001", "1", "2", "3"]
    page.fill("[data-filter-path]", "optim.lr")
    page.fill("[data-filter-value]", "1e-4..5e-4")  # a range (the equality filter stays: none is both)
    page.click("[data-table-apply]")
    page.wait_for_selector("text=No runs match these filters")
    page.click("[data-filter-chip]:has-text('optim.lr = 0.001')")  # drop the first one (1e-3 as the number reads)
    page.wait_for_function("document.querySelectorAll('[data-filter-chip]').length === 1")
    assert sorted(row_names(page)) == ["low-lr", "mid-lr"]


def test_three_seed_repeats_show_as_one_row_with_mean_and_spread(page, studio):
    open_table(page, studio, "?col=last:reward/mean&col=set:optim.lr&sort=-last:reward/mean")
    page.check("[data-group-toggle]")
    page.click("[data-table-apply]")
    page.wait_for_selector("tr[data-group-row]")
    groups = page.locator("tr[data-group-row]")
    assert groups.count() == 3
    # by the groups' mean, highest first: mid-lr 0.95 (alone), the repeats 0.7 ± 0.2, low-lr 0.2
    assert groups.nth(0).locator("[data-cell]").all_inner_texts() == ["0.95 (n=1)", "0.0003"]
    repeats = groups.nth(1)
    assert repeats.locator("[data-group-size]").inner_text() == "3 runs"
    assert repeats.locator("[data-cell]").all_inner_texts() == ["0.7 ± 0.2 (n=3)", "0.001"]
    assert groups.nth(2).locator("[data-cell]").first.inner_text() == "0.2 (n=1)"
    assert row_names(page) == []  # the members are folded away
    repeats.locator("[data-expand]").click()
    assert sorted(row_names(page)) == ["repeat-1", "repeat-2", "repeat-3"]
    assert sorted(column_cells(page, "tr[data-group-member]:not([hidden])")) == ["0.001"] * 3 + ["0.5", "0.7", "0.9"]


def test_three_selected_rows_compare_with_a_band(page, studio, world):
    open_table(page, studio, "?col=last:reward/mean")
    for name in ("repeat-1", "repeat-2", "repeat-3"):
        page.check(f"#run-{world['ids'][name]} [data-select-row]")
    page.click("[data-compare-selected]")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert sorted(parse_qs(urlparse(page.url).query)["runs"][0].split(",")) == sorted(
        str(world["ids"][n]) for n in ("repeat-1", "repeat-2", "repeat-3"))  # fmt: skip
    # the settings table: the seed alone differs
    assert page.locator("[data-diff-table] tbody th").all_inner_texts() == ["optim.seed"]
    assert sorted(page.locator("[data-diff-table] tbody td").all_inner_texts()) == ["1", "2", "3"]
    chart = page.wait_for_selector("[data-band-chart][data-ready='1']")
    traces = chart.evaluate("el => el.data.map((t) => ({name: t.name, x: t.x, y: t.y, fill: t.fill || null}))")
    upper, lower, mean = traces
    assert mean["name"].endswith(" ×3") and mean["x"] == [1, 2, 3]
    assert mean["y"] == pytest.approx([0.2, 2 / 3, 0.7])
    assert lower["fill"] == "tonexty" and lower["y"] == pytest.approx([0.1, 0.5, 0.5])
    assert upper["y"] == pytest.approx([0.3, 0.9, 0.9])
    page.click("label:has([name=bandfill][value=std])")  # ± std: at step 2, 0.6667 ± the sample std of 0.5, 0.9, 0.6
    page.wait_for_function("document.querySelector('[data-band-chart]').dataset.fill === 'std'")
    upper, lower = chart.evaluate("el => [el.data[0].y, el.data[1].y]")
    assert upper[1] == pytest.approx(2 / 3 + statistics.stdev([0.5, 0.9, 0.6]))
    assert lower[0] == pytest.approx(0.2 - 0.1) and lower[2] == pytest.approx(0.7 - 0.2)
    # the overlaid curves: one line per run in the reward panel
    page.wait_for_function("document.querySelectorAll('[data-curves] .js-plotly-plot').length > 0")
