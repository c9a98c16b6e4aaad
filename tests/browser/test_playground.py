"""The playground in a real browser, against a real studio, Celery worker and model server process
(the transformers server, tiny model): a message streams back piece by piece, two models answer side
by side, the conversation is saved as a note and as a dataset row, an agent checkpoint calls its run's calculator (run on
the worker) and the page shows the call and its result, and a member of another team cannot open it."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.live_studio import requires_chromium
from tests.studio.serving.served import CALCULATOR_QUESTION, PASSWORD, build_calculator_model, start_serving_studio

pytestmark = [pytest.mark.slow, requires_chromium]

# Counts the changes of each reply's text while it streams, on the page itself.
COUNT_UPDATES = """() => {
  window.pgUpdates = new Map();
  new MutationObserver((records) => {
    for (const r of records) {
      const turn = r.target.nodeType === 1 ? r.target.closest("[data-role=assistant]") : r.target.parentElement?.closest("[data-role=assistant]");
      if (turn) window.pgUpdates.set(turn, (window.pgUpdates.get(turn) || 0) + 1);
    }
  }).observe(document.querySelector("[data-columns]"), {subtree: true, childList: true, characterData: true});
}"""


# The tools environment the calculator checkpoint was cold-started in (served.CALCULATOR_MODEL).
CALCULATOR_TOOLS = {"kind": "tools", "params": {"tools": [{"kind": "calculator"}], "formats": ["hermes"]},
                    "max_turns": 3}  # fmt: skip
WITH_TOOLS = """
from studio.runs.models import Run
run = Run.objects.get(pk=%d)
run.spec = {**run.spec, "environment": %r}
run.save(update_fields=["spec"])
"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    # base/ is the untrained tiny model; the runs' step-4 is it cold-started to call the calculator.
    models = build_calculator_model(tmp_path_factory.mktemp("models"))
    live, records = start_serving_studio(tmp_path_factory.mktemp("studio"), models)
    live.records = records
    try:
        live.shell(WITH_TOOLS % (records["runs"]["Ana's lab"], CALCULATOR_TOOLS))
    except BaseException:
        live.stop()
        raise
    yield live
    live.stop()


def playground_url(studio, team: str = "Ana's lab") -> str:
    return f"{studio.base_url}/runs/{studio.records['runs'][team]}/playground/"


def send(page, text: str) -> None:
    page.locator("textarea[name=message]").fill(text)
    page.locator("[data-send]").click()


def test_a_message_streams_back(browser, studio):
    page, errors = studio.signed_in_page(browser, "ana", PASSWORD)
    page.goto(playground_url(studio))
    # The base model: untrained, it writes on (the checkpoint soon ends a turn it was not trained for).
    run = studio.records["runs"]["Ana's lab"]
    page.locator("select[name=model]").select_option(f"run-{run}/base")
    page.locator("input[name=max_tokens]").fill("24")
    page.locator("input[name=temperature]").fill("1")
    page.evaluate(COUNT_UPDATES)
    send(page, "Tell me a story")
    reply = page.locator("[data-column] [data-role=assistant]").first
    expect(reply).to_have_attribute("data-done", "1", timeout=180_000)
    assert reply.text_content().strip()
    assert reply.get_attribute("data-error") is None, reply.text_content()
    updates = page.evaluate("() => [...window.pgUpdates.values()]")
    assert updates and updates[0] >= 3, f"the reply arrived in {updates} updates, not as it was generated"
    assert errors == []


def test_two_models_answer_side_by_side_and_the_talk_is_saved_as_a_note(browser, studio):
    page, errors = studio.signed_in_page(browser, "ana", PASSWORD)
    page.goto(playground_url(studio))
    run = studio.records["runs"]["Ana's lab"]
    page.locator("select[name=model]").select_option(f"run-{run}/base")
    page.locator("select[name=model2]").select_option(f"run-{run}/step-4")
    page.locator("input[name=max_tokens]").fill("8")
    send(page, "Hello both")
    columns = page.locator("[data-column]")
    expect(columns).to_have_count(2)
    for i in range(2):
        expect(columns.nth(i).locator("[data-role=assistant]")).to_have_attribute("data-done", "1", timeout=180_000)
        expect(columns.nth(i).locator("[data-role=user]")).to_have_text("Hello both")
    assert [columns.nth(i).get_attribute("data-column") for i in range(2)] == [f"run-{run}/base", f"run-{run}/step-4"]
    page.locator("[data-save]").click()
    expect(page.locator("[data-status]")).to_have_text("saved as a note on the run")
    notes = page.evaluate(f"fetch('/api/runs/{run}/notes/').then(r => r.json())")
    texts = [n["text"] for n in (notes["results"] if isinstance(notes, dict) else notes)]
    assert any(t.startswith(f"Playground conversation with run-{run}/base") and "user: Hello both" in t for t in texts)
    # and as the first row of a new dataset, the prompt the user's message and the answer the reply
    page.locator("[data-save-row]").click()
    expect(page.locator("[data-status]")).to_contain_text("saved as row 1 of dataset Playground conversations")
    reply = columns.nth(0).locator("[data-role=assistant]").text_content()
    dataset = page.locator("[data-row-dataset]").input_value()
    preview = page.evaluate(f"fetch('/api/datasets/{dataset}/preview/').then(r => r.json())")
    assert preview["rows"][0]["messages"] == [{"role": "user", "content": "Hello both"}]
    assert preview["rows"][0]["answer"] == reply
    assert errors == []


def test_a_member_of_another_team_cannot_open_it(browser, studio):
    page, _ = studio.signed_in_page(browser, "ben", PASSWORD)
    response = page.goto(playground_url(studio))
    assert response.status == 404
    status = page.evaluate(
        """(url) => fetch(url + "generate", {method: "POST", headers: {"Content-Type": "application/json",
             "X-CSRFToken": document.cookie.match(/csrftoken=([^;]+)/)?.[1] || ""},
             body: JSON.stringify({model: "run-1/base", messages: [{role: "user", content: "hi"}]})}).then(r => r.status)""",
        playground_url(studio),
    )
    assert status == 404
    assert httpx.get(playground_url(studio), follow_redirects=False).status_code == 302  # signed out: to sign in


def test_a_viewer_of_the_team_talks_but_does_not_save_notes(browser, studio):
    page, _ = studio.signed_in_page(browser, "vic", PASSWORD)
    response = page.goto(playground_url(studio))
    assert response.status == 200
    expect(page.locator("[data-save]")).to_have_count(0)


POST_GENERATE = """([url, body]) => fetch(url + "generate", {method: "POST", headers: {"Content-Type": "application/json",
     "X-CSRFToken": document.cookie.match(/csrftoken=([^;]+)/)?.[1] || ""}, body: JSON.stringify(body)})
     .then(async r => [r.status, await r.text()])"""


def test_an_agent_checkpoint_calls_the_runs_calculator_and_the_page_shows_it(browser, studio):
    page, errors = studio.signed_in_page(browser, "ana", PASSWORD)
    page.goto(playground_url(studio))
    run = studio.records["runs"]["Ana's lab"]
    page.locator("select[name=model]").select_option(f"run-{run}/step-4")
    page.locator("input[name=temperature]").fill("0")
    page.locator("input[name=max_tokens]").fill("40")
    page.locator("[data-use-tools]").check()
    send(page, CALCULATOR_QUESTION)
    column = page.locator("[data-column]").first
    expect(column.locator("[data-role=tool-call]")).to_have_text('calculator({"expression":"2+2"})', timeout=180_000)
    result = column.locator("[data-role=tool-result]")
    expect(result).to_have_text("4", timeout=60_000)  # the worker's calculator, not the model, said 4
    assert result.get_attribute("data-error") is None
    assert result.locator("*").count() == 0  # inserted as text
    answers = column.locator("[data-role=assistant]")
    expect(answers).to_have_count(2)  # asked again with the result
    expect(answers.nth(1)).to_have_attribute("data-done", "1", timeout=60_000)
    roles = column.locator(".pg-turn").evaluate_all("els => els.map(e => e.dataset.role)")
    assert roles == ["user", "assistant", "tool-call", "tool-result", "assistant"], roles
    assert "<tool_call>" in answers.nth(0).text_content()
    assert errors == []
    status, text = page.evaluate(
        POST_GENERATE,
        [
            playground_url(studio),
            {"model": f"run-{run}/step-4", "messages": [{"role": "user", "content": "hi"}], "use_run_tools": "yes"},
        ],
    )
    assert status == 400 and "use_run_tools" in text


def test_a_member_of_another_team_cannot_use_its_tools(browser, studio):
    page, _ = studio.signed_in_page(browser, "ben", PASSWORD)
    run = studio.records["runs"]["Ana's lab"]
    page.goto(playground_url(studio, "Ben's lab"))
    expect(page.locator("[data-use-tools]")).to_have_count(0)  # Ben's run has no tools environment
    body = {
        "model": f"run-{run}/step-4",
        "messages": [{"role": "user", "content": CALCULATOR_QUESTION}],
        "use_run_tools": True,
    }
    status, _ = page.evaluate(POST_GENERATE, [playground_url(studio), body])
    assert status == 404
    status, text = page.evaluate(POST_GENERATE, [playground_url(studio, "Ben's lab"), body])
    assert status == 400 and "no tools environment" in text
