"""The warnings for a run that cannot learn (trainers.run.learning_watch), on the run page in a real browser,
in words and with what to change (issue 39: a newcomer's agent learned nothing and nothing said so):

- a run whose groups all score alike: the real worker trains the tiny demo greedily (temperature 0: every
  sample of a prompt is the same, so no group's rewards differ); after three steps the page's banner says
  so and what to change;
- a run whose tool calls are cut by the turn limit: the trainer's own LearningWatch looks at groups whose
  episodes end inside a malformed tool call at the token limit, and reports through the worker's
  DatabaseReporter while the page is open (the tiny model writes no tool calls, so those groups are made
  by the script: it stands in for the sampling, not for the watch, the reporter or the page).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, LiveStudio, requires_chromium
from tests.browser.test_run_stop import launch

pytestmark = [pytest.mark.slow, requires_chromium]

ALIKE = {"optim": {"total_steps": 4, "prompts_per_step": 2}, "algorithm": {"group_size": 4},
         "rollout": {"temperature": 0.0, "max_new_tokens": 6}}  # fmt: skip

# Step 1 of a tools run whose episodes end in a tool call cut at the token limit, seen by the trainer's watch
# and reported as the worker reports (a run written as the studio would have it, then the report).
CUT_CALLS = """
import json, sys, django
django.setup()
from django.utils import timezone
from studio.runs.models import Run
from trainers.episodes import Episode, ToolCall, Turn
from trainers.report import CriterionScore
from trainers.rewards.sample import RubricResult
from trainers.run.learning_watch import LearningWatch
from trainers.spec import RunSpec
from trainers.update.groups import Group
from workers.reporting import DatabaseReporter

source = Run.objects.get(pk=int(sys.argv[1]))
spec = {**source.spec, "environment": {"kind": "tools", "params": {"tools": [{"kind": "calculator"}]}, "max_turns": 2},
        "rollout": {**source.spec.get("rollout", {}), "max_new_tokens": 24}}
run = Run.objects.create(team=source.team, experiment=source.experiment, name="calculator agent", spec=spec,
                         state="running", total_steps=4, created_by=source.created_by, started=timezone.now())
print(json.dumps({"run": run.pk}), flush=True)
sys.stdin.readline()  # the page is open
call = ToolCall(name="", error="malformed tool call: not JSON (Unterminated string at char 31)")
def episode(cut):
    return Episode(prompt_ids=[1], messages=[], turns=[Turn(token_ids=[5] * 24,
        text='<tool_call>{"name": "calculator", "arguments": {"expression": "20 +', finish_reason="length",
        tool_calls=[call])] if cut else [Turn(token_ids=[5, 6], text="39", finish_reason="stop")])
scores = [0.0, 1.0, 0.0, 1.0]
results = [RubricResult(reward=s, scores={"correct": CriterionScore(s)}) for s in scores]
group = Group(None, [episode(i < 3) for i in range(4)], results, scores, has_spread=True)
reporter = DatabaseReporter(run.pk)
LearningWatch(RunSpec.model_validate(run.spec)).observe(1, [group], reporter)
reporter.flush()
"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    live = LiveStudio(tmp_path_factory.mktemp("studio")).start(worker=True)
    yield live
    live.stop()


def open_run(browser, studio, session: str, run_id: int):
    page, errors = studio.session_page(browser, session)
    page.goto(f"{studio.base_url}/runs/{run_id}/")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return page, errors


@pytest.fixture(scope="module")
def alike(studio):
    return launch(studio, ALIKE)


def test_a_run_whose_groups_all_score_alike_says_so_and_what_to_change(browser, studio, alike):
    page, errors = open_run(browser, studio, alike["session"], alike["run"])
    banner = page.locator("[data-run-warning]")
    banner.wait_for(state="visible", timeout=240_000)  # after three steps on the worker
    text = banner.inner_text()
    assert text.startswith("⚠ in 3 steps no group's rewards differed"), text
    assert "a step learns only from differences between the samples of a prompt" in text
    assert "Make the task reachable" in text and "algorithm.group_size, 4 now" in text
    page.reload()  # it stays: the run's warning, not only a live message
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert page.locator("[data-run-warning]").inner_text() == text
    page.screenshot(path=str(studio.folder / "groups-alike-warning.png"), clip={"x": 0, "y": 0, "width": 1400,
                                                                               "height": 260})  # fmt: skip
    assert not errors, errors
    page.context.close()


def test_a_run_whose_tool_calls_are_cut_by_the_turn_limit_says_so_and_which_setting(browser, studio, alike):
    writer = subprocess.Popen([sys.executable, "-c", CUT_CALLS, str(alike["run"])], cwd=ROOT, env=studio.env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        run_id = json.loads(writer.stdout.readline())["run"]
        page, errors = open_run(browser, studio, alike["session"], run_id)
        assert page.locator("[data-run-warning]").is_hidden()
        writer.stdin.write("open\n")
        writer.stdin.flush()
        assert writer.wait(60) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
    banner = page.locator("[data-run-warning]")
    banner.wait_for(state="visible", timeout=15_000)  # through the websocket, as the trainer reported it
    assert banner.inner_text() == (
        "⚠ 3 of 4 episodes at step 1 wrote a tool call that the turn's token limit (rollout.max_new_tokens, 24) "
        "cut into malformed JSON: the tool never ran. Raise rollout.max_new_tokens so a whole call fits"
    )
    assert not errors, errors
    page.context.close()
