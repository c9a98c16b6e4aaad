"""An agent's environment, end to end in a real browser against a real studio (daphne, a Celery
worker, Redis, SQLite): make a `tools` environment with the calculator and a user tool, try it
(episodes run on the worker with the tiny model), make an experiment with it, launch a run and
open an episode in the run's inspector while it trains: its turns, and the tools it was offered.

The tiny model is untrained, so whether it calls a tool in a given episode is chance; what the
test requires is what the studio guarantees: the environment reached the episode (its system
message lists both tools), each turn shows, and every tool call shown has its result or error.
"""

import json
import re
import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, LiveStudio, requires_chromium
from trainers.rollout.environments.kinds import ENVIRONMENTS

pytestmark = [
    pytest.mark.slow,
    requires_chromium,
    pytest.mark.skipif("tools" not in ENVIRONMENTS, reason="needs the built-in tools kind (branch agent-tools)"),
]

USER, PASSWORD = "ines", "pw-ines-12345"
CREATE_USER = f"""
from django.contrib.auth import get_user_model
from studio.accounts.models import OWNER, Team
user = get_user_model().objects.create_user({USER!r}, password={PASSWORD!r})
Team.objects.create(name="Ines's lab").add_member(user, OWNER)
"""
SHOUT = '''def shout(text: str) -> str:
    """Say the text in capitals.

    Args:
        text: what to say
    """
    return text.upper()
'''
TOOLS = [{"kind": "calculator"}, {"kind": "functions", "params": {"code": SHOUT}}]


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    live = LiveStudio(tmp_path_factory.mktemp("studio")).start(worker=True)
    yield live
    live.stop()


@pytest.fixture(scope="module")
def files(studio, tmp_path_factory):
    subprocess.run([sys.executable, "manage.py", "shell", "-c", CREATE_USER], cwd=ROOT, env=studio.env, check=True)
    home = tmp_path_factory.mktemp("user-files")
    model = home / "tiny-model"
    build = "import sys; from trainers.demos.tiny import build_tiny_model; build_tiny_model(sys.argv[1])"
    subprocess.run([sys.executable, "-c", build, str(model)], cwd=ROOT, env=studio.env, check=True)
    data = home / "sums.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"What is {a}+{a}?", "answer": str(2 * a)}) + "\n" for a in range(4)))
    return {"model": model, "data": data}


def expect_conversation(episode, first_messages_shown: bool = True) -> None:
    """An episode as a conversation: its turns (after the system message listing both tools, where the
    view shows the first messages); every tool call shown carries a result or an error."""
    if first_messages_shown:
        assert "calculator" in episode.text_content() and "shout" in episode.text_content()
    assert episode.locator(".turn").count() >= 1
    for call in episode.locator(".tool-call").all():
        assert call.locator(".tool-result").text_content().strip() or call.locator(".error").count()


def test_an_agent_environment_is_made_tried_and_trained_with_its_turns_readable(browser, studio, files, tmp_path):
    base = studio.base_url
    page, errors = studio.signed_in_page(browser, USER, PASSWORD)

    page.goto(f"{base}/datasets/")
    page.get_by_label("Name").fill("sums")
    page.locator("input[name=file]").set_input_files(str(files["data"]))
    page.get_by_role("button", name="Add dataset").click()
    page.wait_for_url(re.compile(r".*/datasets/\d+/$"))

    page.goto(f"{base}/rubrics/new/")  # starts with one exact_match criterion: the final answer
    page.locator("input[name=name]").fill("exact sum")
    page.get_by_role("button", name="Save rubric").click()
    page.wait_for_url(re.compile(r".*/rubrics/\d+/$"))

    # The environment: the kind's form comes from its params schema; a bad value is shown beside
    # its field and nothing is saved.
    page.goto(f"{base}/environments/new/")
    page.locator("input[name=name]").fill("calculator and shout")
    page.locator("[name='config.kind']").select_option("tools")  # redraws the form with the kind's fields
    page.wait_for_selector("[data-tools-picker]")
    page.locator("[data-tools-json] > summary").click()  # the list as JSON, under the tools picker
    page.locator("[name='config.params.tools']").fill(json.dumps([{"kind": "abacus"}]))
    page.get_by_role("button", name="Save environment").click()
    page.wait_for_load_state()
    assert "abacus" in page.locator("[data-field='config.params.tools'] .error").text_content()
    assert "/environments/new/" in page.url
    page.locator("[name='config.params.tools']").fill(json.dumps(TOOLS))
    for name, value in {"config.max_turns": "2", "config.max_turn_tokens": "12"}.items():
        page.locator(f"[name='{name}']").fill(value)
    page.get_by_role("button", name="Save environment").click()
    page.wait_for_url(re.compile(r".*/environments/\d+/$"))
    assert "v1" in page.locator("h1").text_content()

    # Try it: episodes on the worker, shown as a conversation.
    page.locator("[name=try_model]").fill(str(files["model"]))
    page.locator("[name=try_prompt]").fill("What is 2+2?")
    page.locator("[name=try_episodes]").fill("2")
    page.get_by_role("button", name="Run episodes").click()
    page.wait_for_selector("#tried-episodes .episode, [data-try-error]", timeout=120_000)
    assert page.locator("[data-try-error]").count() == 0, page.locator("[data-try-error]").all_text_contents()
    assert page.locator("#tried-episodes .episode").count() == 2
    expect_conversation(page.locator("#tried-episodes .episode").first)

    # An experiment with the environment, small enough for a CPU; launch it.
    page.goto(f"{base}/experiments/new/")
    page.locator("input[name=name]").fill("sums-agent")
    page.get_by_label("Model (local folder or hub id)").fill(str(files["model"]))
    page.locator("[name=environment]").select_option(label="calculator and shout (tools, v1)")
    page.locator("details[data-group=optim] > summary").click()
    for name, value in {"algorithm.group_size": "2", "optim.prompts_per_step": "2", "optim.micro_batch_size": "8",
                        "optim.total_steps": "30", "rollout.max_new_tokens": "12"}.items():  # fmt: skip
        page.locator(f"[name='{name}']").fill(value)
    page.get_by_role("button", name="Save experiment").click()
    page.wait_for_load_state()
    assert re.match(r".*/experiments/\d+/$", page.url), page.locator("ul.error").all_text_contents()
    assert "calculator and shout" in page.content()
    page.get_by_role("button", name="Launch training run").click()
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)

    # While it trains: open an episode in the inspector and read it turn by turn.
    page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]", timeout=150_000)
    assert page.text_content("[data-live-state]") == "live"
    page.locator(".rollout-list tbody tr[data-rollout-id]").first.click()
    page.wait_for_selector(".rollout-detail .turn", timeout=30_000)
    expect_conversation(page.locator(".rollout-detail"), first_messages_shown=False)  # E2's view: turns only
    page.screenshot(path=str(tmp_path / "agent-run-inspector.png"))

    assert not errors, errors
    page.context.close()


MULTI_LINE_PROMPT = (
    "# Tools\n\nYou may call these:\n<tools>\n{tools}\n</tools>\n\nFor each call, write <tool_call>{...}</tool_call>."
)


def test_a_multi_line_tools_prompt_and_tool_names_survive_a_save(browser, studio, files):
    """The tools prompt is a textarea that keeps its line breaks, and "calculator" is short for the
    tools list [{"kind": "calculator"}] (issue 27)."""
    base = studio.base_url
    page, errors = studio.signed_in_page(browser, USER, PASSWORD)

    page.goto(f"{base}/environments/new/")
    page.locator("input[name=name]").fill("multi-line prompt")
    page.locator("[name='config.kind']").select_option("tools")
    page.wait_for_selector("textarea[name='config.params.tools_prompt']")
    assert "calculator" in page.locator("[data-field='config.params.tools'] .help").text_content()
    page.locator("[data-tools-json] > summary").click()  # the list as JSON, under the tools picker
    page.locator("[name='config.params.tools']").fill("calculator")
    page.locator("[name='config.params.tools_prompt']").fill(MULTI_LINE_PROMPT)
    page.get_by_role("button", name="Save environment").click()
    page.wait_for_url(re.compile(r".*/environments/\d+/$"))
    assert page.locator("[name='config.params.tools_prompt']").input_value() == MULTI_LINE_PROMPT
    assert json.loads(page.locator("[name='config.params.tools']").input_value()) == [
        {"kind": "calculator", "params": {}}
    ]
    assert not errors, errors
    page.context.close()
