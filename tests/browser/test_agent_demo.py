"""The agent demo a newcomer finds on the first start (issue 27), in a real browser against a real studio:
with the real model installed, the first start makes "Demo: SmolLM2-135M-Instruct uses a calculator"
beside the other demos, with its calculator environment (shown by the tools picker) and its cold start;
launching it queues a run of those settings, and the run page's inspector shows an episode's calculator
call and the result that came back.

The real model is not trained here: the first start only reads the installed model's marker, and the
run's step is written by a stand-in for the worker (as tests/browser/synthetic_run.py does) that plays one
episode through the run's own environment (the real calculator) with the call the cold start teaches, and
reports it through the worker's reporter (workers.reporting.DatabaseReporter)."""

import json
import re
import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, LiveStudio, requires_chromium
from trainers.demos import real_agent
from trainers.models.pretrained import MARKER, SMOLLM2

pytestmark = [pytest.mark.slow, requires_chromium]

PASSWORD = "pw-first-start-123"
# The worker's part, for the run the page launched: one step whose episode asks the calculator.
FEED = """
import json
import sys
import django
django.setup()
from studio.runs.events import record
from studio.runs.models import Run
from trainers.demos.real_agent import calculator_call, real_agent_rows
from trainers.episodes import Turn
from trainers.report import CriterionScore, Rollout
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds.tools import ToolsEnvironment
from trainers.spec import RunSpec
from workers.reporting import DatabaseReporter

run = Run.objects.get(pk=int(sys.argv[1]))
spec = RunSpec.model_validate(run.spec)  # the settings the run was launched with
record(run.pk, [("status", None, {"state": "running", "detail": "cold start done"})], state="running")
row = real_agent_rows(1, seed=5)[0]
env = ToolsEnvironment.create(spec.environment.params, EpisodeLimits.of(spec.environment))
start = env.reset({"answer": row["answer"], "messages": [{"role": "user", "content": row["prompt"]}]})
call = calculator_call(row["expression"])
result = env.step(call)
env.close()
answer = result.observation[0]["content"]
turns = [Turn(token_ids=[0] * 30, text=call, observation=result.observation, observation_ids=[0] * 4,
              tool_calls=result.tool_calls, reward=result.reward, reason=result.reason),
         Turn(token_ids=[0] * 3, text=answer, answered=True)]
scores = {"correct": CriterionScore(1.0, "the last number is " + answer),
          "used_calculator": CriterionScore(1.0, "the calculator returned " + answer)}
rollout = Rollout(step=1, prompt_id=row["id"], sample_index=0, prompt=start.messages, completion=answer, reward=1.0,
                  scores=scores, num_tokens=33, turns=[t.to_dict() for t in turns], end_reason="done")
reporter = DatabaseReporter(run.pk)
reporter.metrics(1, {"reward/mean": 1.0, "episode/tool_calls/calculator": 1.0})
reporter.rollouts(1, [rollout])
reporter.flush()
print(json.dumps({"expression": row["expression"], "answer": answer}))
"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    live = LiveStudio(tmp_path_factory.mktemp("studio")).start()
    # The real model as `./studioctl setup` leaves it, as far as the studio looks (its marker and config);
    # the tiny demo's model as built (the first start builds it only where it is missing).
    for folder in (live.folder / "demo" / SMOLLM2.name, live.folder / "demo" / "tiny-model"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    (live.folder / "demo" / SMOLLM2.name / MARKER).write_text(
        json.dumps({"package": SMOLLM2.requirement, "sha256": SMOLLM2.sha256})
    )
    first_start = subprocess.run([sys.executable, "manage.py", "bootstrap"], cwd=ROOT, capture_output=True, text=True,
                                 env={**live.env, "STUDIO_ADMIN_PASSWORD": PASSWORD}, check=True)  # fmt: skip
    assert "first login: admin" in first_start.stdout
    yield live
    live.stop()


def test_the_agent_demo_is_there_after_the_first_start_and_its_inspector_shows_a_calculator_call(browser, studio):
    base = studio.base_url
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    studio.sign_in(page, "admin", PASSWORD)

    page.goto(f"{base}/experiments/")
    page.get_by_role("link", name=real_agent.EXPERIMENT_NAME).click()
    page.wait_for_url(re.compile(r".*/experiments/\d+/$"))
    assert real_agent.EXPERIMENT_DESCRIPTION in page.content()
    page.get_by_role("link", name=re.compile(re.escape(real_agent.ENVIRONMENT_NAME))).first.click()

    # Its environment: the tools kind with the calculator, as the picker shows it.
    page.wait_for_url(re.compile(r".*/environments/\d+/$"))
    page.wait_for_selector("[data-tools-picker]")
    assert [t.get_attribute("data-tool-kind") for t in page.locator(".tool-list li.tool").all()] == ["calculator"]
    page.go_back()

    page.get_by_role("button", name="Launch training run").click()
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run_id = int(re.search(r"/runs/(\d+)/$", page.url).group(1))
    fed = subprocess.run([sys.executable, "-c", FEED, str(run_id)], cwd=ROOT, env=studio.env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert fed.returncode == 0, fed.stderr[-3000:]
    episode = json.loads(fed.stdout.strip().splitlines()[-1])

    page.reload()
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]", timeout=30_000)
    page.locator(".rollout-list tbody tr[data-rollout-id]").first.click()
    page.wait_for_selector(".rollout-detail .episode article.turn", timeout=30_000)
    call = page.locator(".rollout-detail .tool-call").first
    assert call.locator(".tool-name").text_content() == "calculator"
    assert episode["expression"] in call.locator(".tool-args").text_content()
    assert call.locator(".tool-result").text_content().strip() == episode["answer"]
    assert call.locator(".has-error").count() == 0
    assert not errors, errors
    context.close()
