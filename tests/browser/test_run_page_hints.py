"""A run with hints in a real browser while it reports: the inspector marks hinted retries with a
"hinted" badge, shows the hint above the completion (not trained on), and its hinted / not hinted
filter picks them (live ones included)."""

import pytest

from tests.browser.live_studio import requires_chromium
from tests.browser.test_run_page_episodes import ROWS, filter_by
from tests.browser.test_run_page_live import owner_page

pytestmark = [pytest.mark.slow, requires_chromium]


@pytest.fixture(scope="module")
def live_run(studio):
    with studio.synthetic_run(6, 300, 0.5, hints=True) as run:
        yield run


def listed(page) -> list[dict]:
    return page.evaluate("studioRunPage.inspector.items.map(({id, prompt_id, hinted}) => ({id, prompt_id, hinted}))")


def test_hinted_retries_carry_a_badge_and_their_hint_and_filter_apart(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    page.wait_for_selector(ROWS)
    filter_by(page, hinted="1")
    rows = listed(page)
    assert rows and all(r["hinted"] and r["prompt_id"].endswith("@2") for r in rows)
    assert page.locator(f"{ROWS} .tag.hinted").count() == len(rows)
    page.locator(ROWS).first.click()
    page.wait_for_selector(".rollout-detail [data-hint]")
    detail = page.locator(".rollout-detail")
    assert detail.locator(".tag.hinted").text_content() == "hinted 50%"
    assert detail.locator("[data-hint]").text_content().startswith("<think>")
    assert "not trained on" in detail.locator(".hint-label").text_content()
    # live rollouts keep flowing in under the filter, hinted ones only
    top = "Number(document.querySelector('.rollout-list tbody tr').dataset.rolloutId)"
    listed_top = page.evaluate(top)
    page.wait_for_function(f"{top} > {listed_top}", timeout=15_000)
    assert all(r["hinted"] for r in listed(page))
    filter_by(page, hinted="0")
    rows = listed(page)
    assert rows and not any(r["hinted"] for r in rows) and page.locator(f"{ROWS} .tag.hinted").count() == 0
    assert not errors, errors
    page.context.close()
