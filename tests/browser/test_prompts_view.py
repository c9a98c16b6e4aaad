"""The prompts view of a run in a real browser, while the run reports: its per-prompt statistics sort
and filter on the server, a never-solved prompt's link opens the run page's inspector on that
prompt's rollouts (its repeats in a step, "id@2", among them), and the run page draws the
"Prompts: solved / learnable / never solved" curve.

The run is synthetic_run.py's `prompts` mode: rows 00-02 are always answered right, 03-05 never,
the rest half the time; row 03 is also drawn a second time in every fourth step."""

import itertools

import pytest

from tests.browser.live_studio import requires_chromium
from tests.browser.test_run_page_live import owner_page

pytestmark = [pytest.mark.slow, requires_chromium]

HISTORY, TOTAL, INTERVAL = 12, 300, 1.0
ROWS = ".prompts-table tbody tr[data-prompt-id]"
NEVER_SOLVED = {"row-03", "row-04", "row-05"}


@pytest.fixture(scope="module")
def live_run(studio):
    with studio.synthetic_run(HISTORY, TOTAL, INTERVAL, prompts=True) as run:
        yield run


def prompts_page(browser, studio, live_run):
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": live_run["session"], "url": studio.base_url}])
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{studio.base_url}/runs/{live_run['run']}/prompts/")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return page, errors


def listed(page) -> list[dict]:
    return page.evaluate("studioPromptsPage.table.items.map(({prompt_id, status, pass_rate, history, preview}) => "
                         "({prompt_id, status, pass_rate, history, preview}))")  # fmt: skip


def choose(page, expect: str, act) -> None:
    """Do `act`, then wait for the list the server sends for `expect` (a piece of its address)."""
    with page.expect_response(lambda r: "/prompts/?" in r.url and expect in r.url):
        act()
    page.wait_for_function("!document.querySelector('[data-prompts]').classList.contains('is-loading')")


def test_the_prompts_view_sorts_filters_and_leads_to_a_never_solved_prompts_rollouts(browser, studio, live_run):
    page, errors = prompts_page(browser, studio, live_run)
    page.wait_for_selector(ROWS)
    rows = listed(page)
    assert {r["prompt_id"] for r in rows} == {f"row-{k:02d}" for k in range(12)}  # every row was drawn
    assert all(r["preview"].startswith("What is ") for r in rows)  # the prompt's text, joined from its rollouts
    assert all(r["history"] for r in rows) and page.locator(f"{ROWS} svg.sparkline").count() == len(rows)

    choose(page, "order=pass_rate", lambda: page.select_option("form.prompts-filters [name=order]", "pass_rate"))
    rates = [r["pass_rate"] for r in listed(page)]
    assert rates == sorted(rates) and rates[0] < rates[-1]
    shown = [float(t) for t in page.locator(f"{ROWS} [data-field=pass_rate]").all_text_contents()]
    assert shown == sorted(shown)

    choose(
        page, "status=never_solved", lambda: page.locator("label:has(input[name=status][value=never_solved])").click()
    )
    rows = listed(page)
    assert {r["prompt_id"] for r in rows} == NEVER_SOLVED and {r["status"] for r in rows} == {"never_solved"}
    assert page.locator("[data-count=never_solved]").text_content() == "(3)"
    assert all(passed == 0 for r in rows for _, passed, _ in r["history"])

    page.locator(f"{ROWS}[data-prompt-id='row-03'] [data-rollouts-link]").click()
    page.wait_for_url("**/runs/*/?prompt=row-03#rollouts")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert page.locator("form.filters [name=prompt]").input_value() == "row-03"
    page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]")
    items = page.evaluate("studioRunPage.rollouts.items.map(({prompt_id, scores}) => ({prompt_id, scores}))")
    assert {it["prompt_id"] for it in items} == {"row-03", "row-03@2"}  # its repeats in a step too
    assert all(it["scores"]["correct"] == 0 for it in items)
    assert not errors, errors
    page.context.close()


def test_the_run_page_draws_the_prompt_status_fractions_in_their_panel(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    panel = page.locator("[data-panel=prompts]")
    panel.scroll_into_view_if_needed()
    assert panel.locator("h3").text_content() == "Prompts: solved / learnable / never solved"
    names = "document.querySelector('[data-panel=prompts] .chart').data?.map((t) => t.name) ?? []"
    page.wait_for_function(f"({names}).length >= 4", timeout=15_000)
    assert set(page.evaluate(names)) >= {"prompts/solved_frac", "prompts/learnable_frac", "prompts/never_solved_frac"}
    assert page.locator("[data-prompts-link]").get_attribute("href") == f"/runs/{live_run['run']}/prompts/"
    assert not errors, errors
    page.context.close()


LATEST = "Math.max(...studioPromptsPage.table.items.map((it) => it.last_step))"
UPDATED = "document.querySelector('[data-prompts-updated]').textContent"
# When the page asked for each list of prompts (resource timing: the browser's clock, in ms)
READS = "performance.getEntriesByType('resource').filter((e) => e.name.includes('/prompts/?')).map((e) => [e.startTime, e.name])"


def updated_past(page, step: int) -> int:
    """Wait until the rows shown were drawn after `step` (read live); returns the header's "Statistics up to step N"."""
    page.wait_for_function(f"{LATEST} > {step} && /^Statistics up to step \\d+$/.test({UPDATED})", timeout=20_000)
    return int(page.evaluate(UPDATED).split()[-1])


def test_the_prompts_view_follows_the_run_without_a_reload_keeping_sort_filter_and_throttle(browser, studio, live_run):
    page, errors = prompts_page(browser, studio, live_run)
    page.wait_for_selector(ROWS)
    choose(page, "order=-draws", lambda: page.select_option("form.prompts-filters [name=order]", "-draws"))
    choose(
        page, "status=never_solved", lambda: page.locator("label:has(input[name=status][value=never_solved])").click()
    )
    page.evaluate("window.sameDocument = true")
    since = page.evaluate("performance.now()")
    before = page.evaluate(LATEST)
    updated_past(page, before)  # a never-solved row drawn since (every 4th step): its new statistics
    # Read in one call: a step a second arrives between two reads (the header's run step may be ahead
    # of the statistics, which are re-read at most every two seconds; never behind them).
    latest, updated, live, run_step = page.evaluate(
        f"[{LATEST}, {UPDATED}, document.querySelector('[data-live-state]').textContent,"
        " document.querySelector('[data-run-step]').textContent]"
    )
    step = int(updated.split()[-1])
    assert latest <= step
    assert live == "live"
    shown, total = run_step.split(" / ")
    assert int(total) == TOTAL and step <= int(shown) <= TOTAL, (run_step, step)

    # the socket drops: the page reconnects from its cursor and goes on updating
    page.evaluate("studioPromptsPage.socket.socket.close()")
    page.wait_for_function("document.querySelector('[data-live-state]').textContent === 'reconnecting'")
    updated_past(page, page.evaluate(LATEST))
    assert page.text_content("[data-live-state]") == "live"

    assert page.evaluate("window.sameDocument") is True  # updated in place, not reloaded
    assert {r["prompt_id"] for r in listed(page)} == NEVER_SOLVED
    assert page.locator("form.prompts-filters [name=order]").input_value() == "-draws"
    assert page.locator("input[name=status][value=never_solved]").is_checked()
    reads = [(start, url) for start, url in page.evaluate(READS) if start > since]
    assert all("status=never_solved" in url and "order=-draws" in url for _, url in reads), reads
    draws = [int(t) for t in page.locator(f"{ROWS} [data-field=draws]").all_text_contents()]
    assert draws == sorted(draws, reverse=True)
    # a step a second, but one read per two seconds at most
    starts = sorted(start for start, _ in reads)
    assert len(starts) >= 3 and min(b - a for a, b in itertools.pairwise(starts)) >= 1900, starts
    assert not errors, errors
    page.context.close()


def test_a_share_link_viewer_sees_the_prompts_view_update_live(browser, studio, live_run):
    page, _ = owner_page(browser, studio, live_run)
    page.fill("[name=share_label]", "prompts")
    page.click("[data-share-create]")
    url = page.locator(".share-url input").first.input_value()
    guest = browser.new_context(viewport={"width": 1366, "height": 900})  # no cookies: the link alone
    guest_page = guest.new_page()
    errors = []
    guest_page.on("pageerror", lambda err: errors.append(str(err)))
    guest_page.goto(f"{url}prompts/")
    guest_page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert guest_page.locator("[data-readonly-banner]").is_visible()
    guest_page.wait_for_selector(ROWS)
    updated_past(guest_page, guest_page.evaluate(LATEST))
    assert guest_page.text_content("[data-live-state]") == "live"

    page.click("[data-share-list] [data-revoke]")
    guest_page.wait_for_selector("[data-access-lost]", state="visible", timeout=5_000)
    assert guest_page.text_content("[data-live-state]") == "closed"
    assert not errors, errors
    guest.close()
    page.context.close()
