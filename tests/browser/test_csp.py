"""The Content-Security-Policy in a real browser: the pages whose scripts moved to files (the theme
before first paint, the experiment form, the kind selects of the rubric and environment editors)
and the live run page (plotly.js served by the studio, the websocket) work under it, and Chromium
reports no violation on any of them."""

from __future__ import annotations

import pytest

from tests.browser.live_studio import requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]


@pytest.fixture(scope="module")
def live_run(studio):
    with studio.synthetic_run(20, 60, 0.5) as run:
        yield run


@pytest.fixture
def page(browser, studio, live_run):
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": live_run["session"], "url": studio.base_url}])
    page = context.new_page()
    page.violations = []
    page.on("console", lambda m: "Content Security Policy" in m.text and page.violations.append(m.text))
    page.on("pageerror", lambda err: page.violations.append(str(err)))
    yield page
    context.close()


def test_the_live_run_page_draws_and_streams_under_the_policy(page, studio, live_run):
    response = page.goto(f"{studio.base_url}/runs/{live_run['run']}/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    page.wait_for_selector(".js-plotly-plot", timeout=15_000)  # plotly.js, served by the studio
    page.wait_for_function("() => document.querySelector('[data-live-state]').textContent === 'live'", timeout=15_000)
    assert page.violations == []


def test_the_stored_theme_applies_before_paint_from_a_file(page, studio):
    page.goto(f"{studio.base_url}/rubrics/")
    page.evaluate("localStorage.setItem('studio-theme', 'dark')")
    page.goto(f"{studio.base_url}/rubrics/")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.violations == []


def test_a_kind_select_redraws_the_editor_without_an_inline_handler(page, studio):
    page.goto(f"{studio.base_url}/rubrics/new/")
    page.locator("input[name=name]").fill("under csp")
    kinds = page.locator("select[name='c0.kind'] option").all_text_contents()
    other = next(k for k in kinds if k != page.locator("select[name='c0.kind']").input_value())
    with page.expect_navigation():
        page.locator("select[name='c0.kind']").select_option(other)  # submits the form's refresh button
    assert page.locator("select[name='c0.kind']").input_value() == other
    assert page.locator("input[name=name]").input_value() == "under csp"
    assert page.violations == []


def test_the_experiment_form_script_runs_from_its_file(page, studio):
    page.goto(f"{studio.base_url}/experiments/new/")
    kl_beta = page.locator("[name='algorithm.kl_beta']")
    kl_beta.fill("0.5")  # experiment_form.js marks a field changed away from the preset
    assert "changed" in page.locator("[data-field='algorithm.kl_beta']").get_attribute("class")
    assert page.violations == []
