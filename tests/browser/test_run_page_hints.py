"""A run with hints in a real browser while it reports: the inspector marks hinted retries with a
"hinted" badge, shows the hint above the completion (not trained on), and its hinted / not hinted
filter picks them (live ones included). A hint longer than the API's cap has its own "show all"."""

import pytest

from studio.runs.texts import TEXT_CAP
from tests.browser.live_studio import requires_chromium
from tests.browser.test_run_page_episodes import ROWS, filter_by
from tests.browser.test_run_page_live import owner_page

pytestmark = [pytest.mark.slow, requires_chromium]


@pytest.fixture(scope="module")
def live_run(studio):
    with studio.synthetic_run(6, 300, 0.5, hints=True) as run:
        yield run


def listed(page) -> list[dict]:
    return page.evaluate("studioRunPage.rollouts.items.map(({id, prompt_id, hinted}) => ({id, prompt_id, hinted}))")


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


def shown_chars(button) -> int:
    """The full length a "show all N characters" button names."""
    return int(button.text_content().removeprefix("show all ").removesuffix(" characters").replace(",", ""))


def test_a_long_hint_has_its_own_show_all_that_reads_the_whole_hint_and_leaves_the_completion(
    browser, studio, live_run
):
    page, errors = owner_page(browser, studio, live_run)
    page.wait_for_selector(ROWS)
    filter_by(page, hinted="1")
    [long_one] = [it["id"] for it in page.evaluate("studioRunPage.rollouts.items")[:8] if it["sample_index"] == 0]
    page.locator(f"{ROWS}[data-rollout-id='{long_one}']").click()
    page.wait_for_selector(".rollout-detail [data-hint]")
    detail = page.locator(".rollout-detail")
    hint, completion = detail.locator("[data-hint]"), detail.locator("[data-full=completion]")
    hint_button, completion_button = (
        detail.locator("[data-show-all=hint]"),
        detail.locator("[data-show-all=completion]"),
    )
    assert len(hint.text_content()) == TEXT_CAP and len(completion.text_content()) == TEXT_CAP
    hint_chars, completion_chars = shown_chars(hint_button), shown_chars(completion_button)
    assert hint_chars > TEXT_CAP and completion_chars > TEXT_CAP

    # the completion's "show all" replaces the completion only: the hint, cut, keeps its button
    with page.expect_response(lambda r: "/text/?" in r.url and "field=completion" in r.url):
        completion_button.click()
    page.wait_for_function(
        f"document.querySelector('.rollout-detail [data-full=completion]').textContent.length === {completion_chars}"
    )
    assert len(hint.text_content()) == TEXT_CAP and hint_button.is_visible()

    # the hint's reads field=hint and replaces the hint only
    with page.expect_response(lambda r: "/text/?" in r.url and "field=hint" in r.url):
        hint_button.click()
    page.wait_for_function(f"document.querySelector('.rollout-detail [data-hint]').textContent.length === {hint_chars}")
    assert hint.text_content().startswith("<think>") and hint.text_content().endswith("one at a time;")
    assert hint_button.count() == 0 and len(completion.text_content()) == completion_chars
    assert detail.locator(".hint-label").count() == 1
    assert not errors, errors
    page.context.close()
