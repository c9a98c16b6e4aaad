"""The run page in a real browser while a run reports: curves extend in place, rollouts
arrive, the inspector opens one with the keyboard, a note is added, a share link opens the
run in a fresh browser context and revoking it cuts that context off at once.

Screenshots of the live page at laptop and wide-monitor sizes land in the test's temp
folder (and in $RUN_PAGE_SCREENSHOTS when set)."""

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.browser.live_studio import requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

HISTORY, TOTAL, INTERVAL = 150, 400, 0.5  # 125 s of live steps after the history


@pytest.fixture(scope="module")
def live_run(studio):
    """A run with HISTORY steps written and one more step every INTERVAL seconds."""
    with studio.synthetic_run(HISTORY, TOTAL, INTERVAL) as run:
        yield run


def owner_page(browser, studio, live_run, width=1366, height=768, scheme="light"):
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    context.add_cookies([{"name": "sessionid", "value": live_run["session"], "url": studio.base_url}])
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"{studio.base_url}/runs/{live_run['run']}/")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return page, errors


def line_of(panel: str) -> str:
    """JS for the first curve drawn in `panel` (its min/max band traces, when drawn, carry no name)."""
    return f"document.querySelector('[data-panel={panel}] .chart').data.find((t) => t.name)"


def points_in(page, panel="reward"):
    return page.evaluate(f"{line_of(panel)}.x.length")


def test_curves_open_and_extend_in_place_as_steps_arrive(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    first = points_in(page)
    assert first >= HISTORY
    chart = page.evaluate_handle("document.querySelector('[data-panel=reward] .chart')")
    page.evaluate("(el) => { el.dataset.marker = 'same-element'; }", chart)
    page.wait_for_function(f"{line_of('reward')}.x.length >= {first + 3}", timeout=15_000)
    # extended, not redrawn from scratch: the same DOM node, with our marker
    assert page.evaluate("document.querySelector('[data-panel=reward] .chart').dataset.marker") == "same-element"
    for panel in ("criteria", "kl", "entropy", "clip", "length", "advantage", "grad_norm", "lr", "tokens", "timing"):
        assert points_in(page, panel) >= HISTORY, panel
    step = int(page.text_content("[data-run-step]").split("/")[0])
    assert step > HISTORY
    # the REST load and the socket overlap by a step or two: each step is drawn, and listed, once
    assert page.evaluate(f"(x => x.every((v, i) => i === 0 || v > x[i - 1]))({line_of('reward')}.x)")
    assert page.evaluate("(ids => new Set(ids).size === ids.length)(studioRunPage.rollouts.items.map(it => it.id))")
    assert page.text_content("[data-live-state]") == "live"
    assert "step" in page.text_content("[data-log-tail]")
    assert not errors, errors
    page.context.close()


def test_zooming_one_chart_zooms_them_all_and_fetches_that_window(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    with page.expect_request(lambda r: "/metrics/" in r.url and "start=20" in r.url and "end=60" in r.url):
        page.evaluate("Plotly.relayout(document.querySelector('[data-panel=kl] .chart'), {'xaxis.range': [20, 60]})")
    page.wait_for_function(
        "JSON.stringify(document.querySelector('[data-panel=reward] .chart').layout.xaxis.range) === '[20,60]'"
    )
    # the detail: raw points of steps 20..60 only
    page.wait_for_function(f"{line_of('reward')}.x[0] >= 20")
    with page.expect_request(lambda r: "/metrics/" in r.url and "start=" not in r.url):
        page.evaluate("Plotly.relayout(document.querySelector('[data-panel=kl] .chart'), {'xaxis.autorange': true})")
    assert not errors, errors
    page.context.close()


def test_a_rollout_opens_with_the_keyboard_and_takes_a_note(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_selector(".rollout-detail .completion")
    detail = page.locator(".rollout-detail")
    assert "What is" in detail.locator(".prompt").text_content()
    assert detail.locator("table.criteria th", has_text="correct").count() == 1
    assert detail.locator(".sibling").count() == 8  # the whole group side by side
    first_id = detail.locator(".sibling.current").get_attribute("data-open-rollout")
    page.keyboard.press("j")  # with the detail open, j reads the next rollout
    page.wait_for_function(
        f"document.querySelector('.rollout-detail .sibling.current')?.dataset.openRollout !== '{first_id}'"
    )
    detail.locator(".quick-tags button", has_text="reward hacking").click()
    detail.locator("textarea[name=text]").fill("answers without thinking")
    detail.locator("button[type=submit]").click()
    page.wait_for_selector(".rollout-notes .note:has-text('answers without thinking')")
    notes_panel = page.locator("[data-notes-panel]")
    assert notes_panel.locator(".note .tag", has_text="reward hacking").count() == 1
    notes_panel.locator("[data-filter-tag='reward hacking']").click()
    assert notes_panel.locator(".note").count() == 1
    page.keyboard.press("Escape")
    assert page.locator(".rollout-detail").is_hidden()
    assert not errors, errors
    page.context.close()


def test_the_list_shows_prompts_and_new_rollouts_flow_in_at_the_top_without_a_click(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]")
    top = "Number(document.querySelector('.rollout-list tbody tr').dataset.rolloutId)"
    first = page.locator(".rollout-list tbody tr").first
    assert re.fullmatch(r"What is \d+ \+ \d+\?", first.locator(".prompt-text").text_content())  # the user's question
    listed = page.evaluate(top)
    page.wait_for_function(f"{top} > {listed}", timeout=10_000)  # scrolled to the top: a later step is listed
    assert page.locator("[data-new-banner]").is_hidden()

    page.evaluate("document.querySelector('[data-rollout-list]').scrollTop = 200")  # reading further down
    reading = page.evaluate(top)
    page.wait_for_selector("[data-new-banner]:not([hidden])", timeout=10_000)
    assert page.evaluate(top) == reading  # the rows being read did not move
    assert re.fullmatch(r"\d+ new rollouts? match(es)?: show them", page.text_content("[data-new-banner]"))
    page.click("[data-new-banner]")
    assert page.evaluate(top) > reading and page.locator("[data-new-banner]").is_hidden()
    assert page.evaluate("document.querySelector('[data-rollout-list]').scrollTop") == 0
    assert page.evaluate("(ids => new Set(ids).size === ids.length)(studioRunPage.rollouts.items.map(it => it.id))")
    assert not errors, errors
    page.context.close()


def test_a_share_link_opens_read_only_follows_notes_and_stops_at_once_when_revoked(browser, studio, live_run):
    page, _ = owner_page(browser, studio, live_run)
    page.fill("[name=share_label]", "reviewers")
    page.click("[data-share-create]")
    url = page.locator(".share-url input").first.input_value()
    assert "/share/" in url

    guest = browser.new_context(viewport={"width": 1366, "height": 768})  # fresh: no cookies, no session
    guest_page = guest.new_page()
    guest_page.goto(url)
    guest_page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert guest_page.locator("[data-readonly-banner]").is_visible()
    assert guest_page.locator("[data-note-form]").count() == 0
    assert points_in(guest_page) >= HISTORY
    guest_page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]")
    assert guest_page.text_content("[data-live-state]") == "live"

    # a note the owner adds reaches the guest's open page, as its banner says
    page.fill("[data-notes-panel] textarea[name=text]", "watch the KL from here")
    page.click("[data-notes-panel] button[type=submit]")
    guest_page.wait_for_selector("[data-notes-panel] .note:has-text('watch the KL from here')", timeout=5_000)

    page.click("[data-share-list] [data-revoke]")
    guest_page.wait_for_selector("[data-access-lost]", state="visible", timeout=5_000)
    assert guest_page.text_content("[data-live-state]") == "closed"
    assert guest_page.goto(url).status == 404
    guest.close()
    page.context.close()


@pytest.mark.parametrize(
    ("width", "height", "scheme"), [(1366, 768, "light"), (2560, 1440, "dark"), (1680, 1050, "light")]
)
def test_screenshots_of_the_live_page(browser, studio, live_run, tmp_path, width, height, scheme):
    page, errors = owner_page(browser, studio, live_run, width, height, scheme)
    page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]")
    time.sleep(2)  # a few live steps
    path = tmp_path / f"run-page-{width}-{scheme}.png"
    page.screenshot(path=str(path))
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_selector(".rollout-detail .completion")
    page.screenshot(path=str(tmp_path / f"run-page-{width}-{scheme}-rollout.png"))
    # nothing overflows the viewport sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    target = os.environ.get("RUN_PAGE_SCREENSHOTS")
    if target:
        for shot in tmp_path.glob("*.png"):
            shutil.copy(shot, Path(target) / shot.name)
    assert not errors, errors
    page.context.close()
