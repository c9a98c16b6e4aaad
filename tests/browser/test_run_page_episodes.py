"""A multi-turn tool run's page in a real browser while it reports: the inspector opens an episode
as a conversation (turns, tool calls with their results, a tool error marked, observations marked
not trained on, turn rewards and advantages), its filters on turns, tools, tool errors and
episodes ended at a limit pick the episodes they name (live ones included), and the episode/*
metrics get their panels."""

import pytest

from tests.browser.live_studio import requires_chromium
from tests.browser.test_run_page_live import owner_page, points_in

pytestmark = [pytest.mark.slow, requires_chromium]

HISTORY, TOTAL, INTERVAL = 6, 300, 0.5
ROWS = ".rollout-list tbody tr[data-rollout-id]"


@pytest.fixture(scope="module")
def live_run(studio):
    with studio.synthetic_run(HISTORY, TOTAL, INTERVAL, episodes=True) as run:
        yield run


def listed(page) -> list[dict]:
    """The summaries the inspector lists now."""
    return page.evaluate("studioRunPage.rollouts.items.map(({id, step, num_turns, tools_used, tool_errors, "
                         "ended_at_limit}) => ({id, step, num_turns, tools_used, tool_errors, ended_at_limit}))")  # fmt: skip


def filter_by(page, **fields) -> None:
    """Set filter controls and wait for the list the server sends for them."""
    with page.expect_response(lambda r: "/rollouts/?" in r.url and all(f"{k}=" in r.url for k in fields)):
        for name, value in fields.items():
            control = page.locator(f"form.filters [name={name}]")
            if control.evaluate("el => el.tagName") == "SELECT":
                control.select_option(value)
            else:
                control.fill(value)
    page.wait_for_function("!document.querySelector('[data-inspector]').classList.contains('is-loading')")


def test_an_episode_with_a_tool_error_opens_as_a_conversation(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    page.wait_for_selector(ROWS)
    filter_by(page, tool_errors="1")
    # The list and its tags read in one go: live rollouts keep arriving between two reads.
    rows, tagged = page.evaluate(
        "(rows) => [studioRunPage.rollouts.items.map(({tool_errors, tools_used}) => ({tool_errors, tools_used})), "
        "document.querySelectorAll(rows + ' .tag.tool-errors').length]",
        ROWS,
    )
    assert rows and all(r["tool_errors"] > 0 and "python" in r["tools_used"] for r in rows)
    assert tagged == len(rows)
    page.locator(ROWS).first.click()
    page.wait_for_selector(".rollout-detail .episode article.turn")
    detail = page.locator(".rollout-detail")
    assert "What is" in detail.locator(".prompt").text_content()
    turns = detail.locator(".episode article.turn")
    assert turns.count() == 3  # python (raises), calculator, answer
    first, second, last = turns.nth(0), turns.nth(1), turns.nth(2)
    error = first.locator(".tool-call.has-error")
    assert error.locator(".tool-name").text_content() == "python"
    assert "ZeroDivisionError" in error.locator(".tool-error").text_content()
    assert "print(" in error.locator(".tool-args").text_content()
    calc = second.locator(".tool-call")
    assert calc.locator(".tool-name").text_content() == "calculator" and calc.locator(".has-error").count() == 0
    a, b = (int(n) for n in calc.locator(".tool-args").text_content().split('"')[3].split(" + "))
    assert calc.locator(".tool-result").text_content() == str(a + b)
    observation = second.locator(".observation")
    assert "not trained on" in observation.locator(".obs-label").text_content()
    # The result once, in its call's box; the observation says it is that (issue 39: it was drawn twice).
    assert "the tool result above" in observation.locator(".obs-label").text_content()
    assert observation.locator(".obs-message").count() == 0
    assert (
        first.locator(".turn-reward").text_content() == "-0.1"
        and "tool error" in first.locator(".turn-reason").text_content()
    )
    assert second.locator(".turn-advantage").text_content() != ""
    assert last.locator(".tool-call").count() == 0 and last.locator(".observation").count() == 0
    assert detail.locator("[data-field=end_reason]").text_content() == "done"
    # and live episodes with a tool error keep flowing in under the filter
    top = "Number(document.querySelector('.rollout-list tbody tr').dataset.rolloutId)"
    listed_top = page.evaluate(top)
    page.wait_for_function(f"{top} > {listed_top}", timeout=15_000)
    assert all(r["tool_errors"] > 0 for r in listed(page))
    assert not errors, errors
    page.context.close()


def test_the_turn_tool_and_limit_filters_pick_the_episodes_they_name(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    page.wait_for_selector(ROWS)
    everything = listed(page)
    assert {r["num_turns"] for r in everything} >= {1, 2, 3}
    filter_by(page, ended_at_limit="1")
    rows = listed(page)
    assert rows and all(r["ended_at_limit"] and r["num_turns"] == 3 for r in rows)
    # Every row drawn carries the mark, counted in one read of the page: live rows keep arriving.
    drawn, marked = page.evaluate(
        """(rows) => { const all = [...document.querySelectorAll(rows)];
                       return [all.length, all.filter((r) => [...r.querySelectorAll('.tag')]
                                                   .some((t) => /at limit/i.test(t.textContent))).length]; }""",
        ROWS,
    )
    assert drawn >= len(rows) and marked == drawn
    page.locator("form.filters button[type=reset]").click()
    filter_by(page, turns_min="2", tool="calculator")
    rows = listed(page)
    assert rows and all(r["num_turns"] >= 2 and "calculator" in r["tools_used"] for r in rows)
    filter_by(page, turns_max="1")  # with turns_min 2 still set: nothing
    page.wait_for_selector(".rollout-list tbody tr.empty")
    page.locator("form.filters button[type=reset]").click()
    filter_by(page, turns_max="1")
    rows = listed(page)
    assert rows and all(r["num_turns"] == 1 and not r["tools_used"] for r in rows)
    assert not errors, errors
    page.context.close()


def test_the_episode_metrics_have_their_panels(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    for panel in ("turns", "tool_calls", "tool_quality", "episode_ends", "observation", "tool_time"):
        assert points_in(page, panel) >= HISTORY, panel
    names = page.evaluate("document.querySelector('[data-panel=tool_calls] .chart').data.map((t) => t.name)")
    assert {"episode/tool_calls/calculator", "episode/tool_calls/python"} <= {str(n) for n in names}, names
    assert not errors, errors
    page.context.close()
