"""The environment editor's tools field as a picker, in a real browser against a real studio (daphne,
a Celery worker, Redis, SQLite): a newcomer builds a working calculator environment without typing
JSON (pick the calculator, save, try it: the episode shows the call and the calculator's result),
each tool kind's settings are fields from its params schema, code is edited in an editor where Tab
indents, the JSON stays one click away and in step with the picker both ways, and try-it's output
wraps instead of widening the page (issue 27: the page grew to 4,404 px).

Try it runs a tiny model that was taught, in a few seconds of a cold start, to ask the calculator
for "2+2" the way the environment's tools prompt says, so the call is there to be shown."""

import json
import re
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.browser.live_studio import ROOT, LiveStudio, requires_chromium
from trainers.rollout.environments.catalog import TOOL_KINDS
from trainers.rollout.environments.system_prompt import DEFAULT, suggested_system_prompt

pytestmark = [pytest.mark.slow, requires_chromium]

USER, PASSWORD = "noor", "pw-noor-12345"
CREATE_USER = f"""
from django.contrib.auth import get_user_model
from studio.accounts.models import OWNER, Team
user = get_user_model().objects.create_user({USER!r}, password={PASSWORD!r})
Team.objects.create(name="Noor's lab").add_member(user, OWNER)
"""
# A tiny model cold-started on one conversation of the environment the test builds (the calculator with
# the system prompt the editor fills in for it, and the default tools prompt): it asks the calculator for
# 2+2, reads 4 and answers 4.
CALCULATOR_MODEL = """
import sys
from pathlib import Path
import torch
from trainers.demos.agent_demo import build_agent_model
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds.tools import ToolsEnvironment
from trainers.run.sft import cold_start

torch.set_num_threads(2)
out = Path(sys.argv[1])
from trainers.rollout.environments.system_prompt import suggested_system_prompt
tools = [{"kind": "calculator"}]
env = ToolsEnvironment.create({"tools": tools, "system_prompt": suggested_system_prompt(tools)}, EpisodeLimits())
start = env.reset({"messages": [{"role": "user", "content": "What is 2+2?"}]})
call = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>'
result = env.step(call)
conversation = [*start.messages, {"role": "assistant", "content": call}, *result.observation,
                {"role": "assistant", "content": "4"}]
cold_start(build_agent_model(out / "base"), [conversation], out / "warm", steps=80, lr=3e-3, batch_size=2,
           device="cpu")
"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    live = LiveStudio(tmp_path_factory.mktemp("studio")).start(worker=True)
    yield live
    live.stop()


@pytest.fixture(scope="module")
def noor(studio):
    subprocess.run([sys.executable, "manage.py", "shell", "-c", CREATE_USER], cwd=ROOT, env=studio.env, check=True)
    return USER


@pytest.fixture(scope="module")
def calculator_model(studio, noor, tmp_path_factory):
    out = tmp_path_factory.mktemp("calculator-model")
    subprocess.run([sys.executable, "-c", CALCULATOR_MODEL, str(out)], cwd=ROOT, env=studio.env, check=True)
    return out / "warm"


def signed_in(browser, studio, width=1366):
    return studio.signed_in_page(browser, USER, PASSWORD, width=width)


def tools_json(page):
    return json.loads(page.locator("[name='config.params.tools']").input_value())


def new_tools_environment(page, base, name):
    page.goto(f"{base}/environments/new/")
    page.locator("input[name=name]").fill(name)
    page.locator("[name='config.kind']").select_option("tools")  # redraws the form with the kind's fields
    page.wait_for_selector("[data-tools-picker]")


def test_a_calculator_environment_is_picked_saved_and_tried_without_typing_json(browser, studio, calculator_model):
    base = studio.base_url
    page, errors = signed_in(browser, studio)
    new_tools_environment(page, base, "picked calculator")

    # A button per registered tool kind; the JSON is folded away under "Edit as JSON".
    assert [b.get_attribute("data-add-tool") for b in page.locator("[data-add-tool]").all()] == TOOL_KINDS.names()
    assert not page.locator("[name='config.params.tools']").is_visible()
    page.get_by_role("button", name="+ calculator").click()
    assert page.locator(".tool-list li.tool[data-tool-kind=calculator]").count() == 1
    assert tools_json(page) == [{"kind": "calculator"}]
    page.get_by_role("button", name="Save environment").click()
    page.wait_for_url(re.compile(r".*/environments/\d+/$"))
    assert "v1" in page.locator("h1").text_content()
    assert page.locator(".tool-list li.tool").count() == 1  # the saved list, shown by the picker again
    assert page.locator(".tool-list li.tool").get_attribute("data-tool-kind") == "calculator"

    # Try it: the episode calls the calculator and shows what came back.
    page.locator("[name=try_model]").fill(str(calculator_model))
    page.locator("[name=try_prompt]").fill("What is 2+2?")
    page.locator("[name=try_episodes]").fill("2")
    with page.expect_navigation():  # the page answers at once and follows the worker's episodes
        page.get_by_role("button", name="Run episodes").click()
    page.wait_for_selector("#tried-episodes .episode, [data-try-error]", timeout=240_000)
    assert page.locator("[data-try-error]").count() == 0, page.locator("[data-try-error]").all_text_contents()
    calls = page.locator("#tried-episodes .tool-call[data-tool=calculator]")
    assert calls.count() >= 1, page.locator("#tried-episodes").text_content()
    assert "4" in [c.locator(".tool-result").text_content().strip() for c in calls.all()]

    # The output wraps: the tools prompt's one-line JSON schemas no longer widen the page.
    for width in (1366, 900):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        system = page.locator("#tried-episodes .episode .message.system pre").first
        assert system.evaluate("el => getComputedStyle(el).whiteSpace") == "pre-wrap"
        assert system.evaluate("el => el.scrollWidth <= el.clientWidth")
    assert not errors, errors
    page.context.close()


def test_each_tool_kind_has_its_settings_as_fields_and_the_json_stays_in_step(browser, studio, calculator_model):
    base = studio.base_url
    page, errors = signed_in(browser, studio)
    new_tools_environment(page, base, "settings")

    # A user function: its code starts as the example, in an editor where Tab indents.
    page.get_by_role("button", name="+ functions").click()
    editor = page.locator(".tool-list li.tool[data-tool-kind=functions] textarea.code-editor")
    example = editor.input_value()
    assert example.startswith("def shout(text: str) -> str:")
    assert tools_json(page) == [{"kind": "functions", "params": {"code": example}}]
    editor.focus()
    editor.evaluate("el => el.setSelectionRange(el.value.length, el.value.length)")
    page.keyboard.press("Tab")
    page.keyboard.type("# more")
    assert editor.input_value() == example + "    # more"
    assert editor.evaluate("el => el === document.activeElement")  # Tab indented, focus stayed
    assert tools_json(page)[0]["params"]["code"] == example + "    # more"

    # Search: its settings from its schema, defaults shown; a change is written to the JSON.
    page.get_by_role("button", name="+ search").click()
    search = page.locator(".tool-list li.tool[data-tool-kind=search]")
    assert search.locator("[data-param=top_k]").input_value() == "3"
    search.locator("[data-param=dataset]").fill("docs.jsonl")
    search.locator("[data-param=top_k]").fill("5")
    assert tools_json(page)[1] == {"kind": "search", "params": {"dataset": "docs.jsonl", "top_k": 5}}
    page.locator(".tool-list li.tool[data-tool-kind=functions] [data-remove-tool]").click()
    assert [t["kind"] for t in tools_json(page)] == ["search"]

    # Edit as JSON: the picker follows; text it cannot show leaves it read-only until the JSON is a list again.
    page.locator("[data-tools-json] > summary").click()
    textarea = page.locator("[name='config.params.tools']")
    textarea.fill(json.dumps([{"kind": "calculator"}, {"kind": "search", "params": {"dataset": "d.jsonl", "top_k": 7}}]))
    assert [k.get_attribute("data-tool-kind") for k in page.locator(".tool-list li.tool").all()] == ["calculator", "search"]
    assert page.locator(".tool-list li.tool[data-tool-kind=search] [data-param=top_k]").input_value() == "7"
    textarea.fill("[{")
    assert page.locator(".tool-blocked").is_visible()
    assert page.get_by_role("button", name="+ calculator").is_disabled()
    textarea.fill('[{"kind": "python"}]')
    assert not page.locator(".tool-blocked").is_visible()
    assert page.locator(".tool-list li.tool").get_attribute("data-tool-kind") == "python"
    assert not errors, errors
    page.context.close()


def test_the_system_prompt_starts_from_the_tools_chosen_and_typed_text_is_kept(browser, studio, noor):
    # Issue 39: a new tools environment's prompt was "You are a helpful assistant." whatever the tools,
    # and a newcomer's calculator agent learned nothing with it. The words come from the server.
    page, errors = signed_in(browser, studio)
    new_tools_environment(page, studio.base_url, "prompted")
    prompt = page.locator("[name='config.params.system_prompt']")
    assert prompt.input_value().strip() == DEFAULT
    calculator = suggested_system_prompt([{"kind": "calculator"}])
    page.get_by_role("button", name="+ calculator").click()
    expect(prompt).to_have_value(calculator)  # not typed by the user: filled in
    assert page.locator("[data-system-prompt-filled]").is_visible()
    page.get_by_role("button", name="+ python").click()
    expect(prompt).to_have_value(suggested_system_prompt([{"kind": "calculator"}, {"kind": "python"}]))

    # Text the user typed stays; the suggestion is offered beside it, one click away.
    prompt.fill("Think step by step.")
    page.locator(".tool-list li.tool[data-tool-kind=python] [data-remove-tool]").click()
    offer = page.locator("[data-system-prompt-offer]")
    expect(offer).to_be_visible()
    expect(offer.locator("q")).to_have_text(calculator)
    assert prompt.input_value() == "Think step by step."
    offer.get_by_role("button", name="Use the suggested system prompt").click()
    assert prompt.input_value() == calculator
    assert not offer.is_visible()
    assert not errors, errors
    page.context.close()
