"""A run's actions and end state in a real browser, on runs written by the test (no training, no worker):

- the run page offers Resume / Evaluate / Clone / Stop only where they can work and only to editors
  (a viewer and a share link see none); Resume answers with a link to the new run, whose page draws
  the curves of the run it continues up to the resume step, lighter, with a dotted line there;
- a finished run shows how long it took, not an ETA, and its live mark says "finished", not a green
  "live"; a run that ends while its page is open turns so at once, and says "scoring failed" when its
  criterion raised on every rollout;
- the runs list answers an action in the row it was asked in;
- a run with validation keeps its validation charts' places in the grid before their first point.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

RESUME_STEP, STEPS = 4, 10

# The runs, written as the studio would have: users, a team, an experiment, finished and running runs.
SETUP = """
import json, sys, time
from datetime import timedelta
import django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.utils import timezone
from studio.accounts.models import OWNER, VIEWER, Team
from studio.experiments.models import Experiment
from studio.experiments.specs import validate
from studio.rubrics.models import Rubric
from studio.runs.models import Checkpoint, MetricPoint, Run
from studio.sharing.models import ShareLink
from trainers.report import CriterionScore, Rollout
from workers.reporting import DatabaseReporter

RESUME_STEP, STEPS = int(sys.argv[1]), int(sys.argv[2])

def session(user):
    s = SessionStore()
    s[SESSION_KEY], s[BACKEND_SESSION_KEY] = str(user.pk), "django.contrib.auth.backends.ModelBackend"
    s[HASH_SESSION_KEY] = user.get_session_auth_hash()
    s.create()
    return s.session_key

users = get_user_model().objects
alice, vera = users.create_user("alice", password="pw-alice-123"), users.create_user("vera", password="pw-vera-123")
team = Team.objects.create(name="Reasoning")
team.add_member(alice, OWNER)
team.add_member(vera, VIEWER)
rubric_spec = {"criteria": [{"name": "correct", "kind": "exact_match"}]}
rubric = Rubric.objects.create(team=team, name="Correct", spec=rubric_spec, created_by=alice)
config = {"data": {"procedural": {"task": "sorting", "max_difficulty": 4}}, "optim": {"total_steps": STEPS}}
experiment = Experiment.objects.create(team=team, name="Exp", rubric=rubric, model_path="/models/tiny", config=config,
                                       created_by=alice)
spec = validate(experiment.spec_config())  # a clone validates the run's settings again
now = timezone.now()

def run(name, state, **fields):
    fields.setdefault("spec", spec)
    return Run.objects.create(team=team, experiment=experiment, name=name, state=state, total_steps=STEPS,
                              created_by=alice, **fields)

def curves(r, steps):
    MetricPoint.objects.bulk_create(MetricPoint(run=r, step=s, key=k, value=v, wall_time=time.time() - 100 + s)
                                    for s in steps for k, v in {"reward/mean": s / 10, "actor/kl": s / 100}.items())
    Run.objects.filter(pk=r.pk).update(last_step=max(steps))

done = run("trained", "succeeded", started=now - timedelta(seconds=100), finished=now)
curves(done, range(1, STEPS + 1))
Checkpoint.objects.create(run=done, step=RESUME_STEP, path=f"/ck/trained/step-{RESUME_STEP}")
bare = run("no checkpoint", "succeeded", started=now - timedelta(seconds=30), finished=now)
curves(bare, range(1, 4))
gone = run("checkpoint removed later", "failed", started=now - timedelta(seconds=30), finished=now)
Checkpoint.objects.create(run=gone, step=2, path="/ck/gone/step-2")
scoring = run("scoring breaks", "running", started=now - timedelta(seconds=20))
reporter = DatabaseReporter(scoring.pk)
for step in (1, 2):
    reporter.rollouts(step, [Rollout(step=step, prompt_id=str(i), sample_index=i, prompt="What is 2+2?", completion="4",
                                     reward=0.0, scores={"correct": CriterionScore(0.0, error="KeyError: 'answer'")})
                             for i in range(8)])
reporter.flush()
curves(scoring, (1, 2))
validating = run("validates", "running", started=now - timedelta(seconds=20),
                 spec={**spec, "validation": {"holdout_fraction": 0.1, "every_n_steps": 2}})
curves(validating, (1,))
print(json.dumps({
    "owner": session(alice), "viewer": session(vera), "share": ShareLink.objects.create(run=done, created_by=alice).token,
    "done": done.pk, "bare": bare.pk, "gone": gone.pk, "scoring": scoring.pk, "validating": validating.pk,
}))
"""

FINISH = """
import sys, django
django.setup()
from studio.runs import lifecycle
assert lifecycle.finish(int(sys.argv[1]), "succeeded", detail="finished")
"""
VAL_STEP = """
import sys, time, django
django.setup()
from studio.runs.events import record
from studio.runs.models import MetricPoint
run_id, values = int(sys.argv[1]), {"val/reward/mean": 0.4, "val/pass@1": 0.3, "reward/mean": 0.2}
MetricPoint.objects.bulk_create(MetricPoint(run_id=run_id, step=2, key=k, value=v, wall_time=time.time())
                                for k, v in values.items())
record(run_id, [("metrics", 2, {"values": values})], last_step=2)
"""
DROP_CHECKPOINTS = """
import sys, django
django.setup()
from studio.runs.models import Checkpoint
Checkpoint.objects.filter(run_id=int(sys.argv[1])).delete()
"""


def script(studio, code: str, *args) -> str:
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=studio.env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout


@pytest.fixture(scope="module")
def world(studio):
    return json.loads(script(studio, SETUP, RESUME_STEP, STEPS))


def open_page(browser, studio, path: str, session: str | None = None):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    if session:
        context.add_cookies([{"name": "sessionid", "value": session, "url": studio.base_url}])
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"{studio.base_url}{path}")
    return page, errors


def run_page(browser, studio, run_id: int, session: str):
    page, errors = open_page(browser, studio, f"/runs/{run_id}/", session)
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return page, errors


def offered(page) -> list[str]:
    """The run actions the page shows, in order."""
    return page.evaluate("[...document.querySelectorAll('[data-run-action]')].filter((b) => !b.hidden)"
                         ".map((b) => b.dataset.runAction)")  # fmt: skip


def wait_live_mark(page, text: str) -> None:
    page.wait_for_function(f"document.querySelector('[data-live-state]').textContent === '{text}'", timeout=15_000)


def test_resume_from_the_run_page_opens_a_run_drawing_the_curves_it_continues(browser, studio, world):
    page, errors = run_page(browser, studio, world["done"], world["owner"])
    # A finished run: how long it took, no ETA, and no green live dot.
    wait_live_mark(page, "finished")
    assert "live-finished" in page.get_attribute("[data-live-state]", "class")
    assert page.text_content("[data-run-eta-label]") == "took"
    assert page.text_content("[data-run-eta]") == "1m 40s"
    assert offered(page) == ["resume", "evaluate", "clone"]

    page.locator("[data-run-action=resume]").click()
    answer = page.locator("[data-action-answer]")
    link = answer.locator("a[data-new-run]")
    link.wait_for(timeout=10_000)
    resumed = int(link.get_attribute("data-new-run"))
    assert resumed != world["done"]
    assert answer.inner_text().startswith(f"Resumed as run #{resumed}: ")
    link.click()
    page.wait_for_url(f"**/runs/{resumed}/")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert f"#{world['done']}" in page.text_content("[data-run-resumed]")

    # Its charts draw the run it continues up to the resume step, lighter, with a dotted line there.
    chart = "document.querySelector('[data-panel=reward] .chart')"
    page.wait_for_function(f"{chart}?.data?.some((t) => t.meta?.resumedFrom === {world['done']})", timeout=15_000)
    earlier = page.evaluate(f"{chart}.data.find((t) => t.meta?.resumedFrom === {world['done']})")
    assert earlier["x"] == list(range(1, RESUME_STEP + 1))
    assert earlier["name"] == f"run #{world['done']} · reward/mean" and "0.45" in earlier["line"]["color"]
    layout = page.evaluate(f"{chart}.layout")
    assert [(s["x0"], s["line"]["dash"]) for s in layout["shapes"]] == [(RESUME_STEP, "dot")]
    assert layout["annotations"][0]["text"] == f"resumed from run #{world['done']} at step {RESUME_STEP}"
    assert page.locator("[data-panel=reward] .shapelayer path").count() >= 1  # drawn, not only configured
    # A queued run with no checkpoint of its own: it can be stopped or cloned, not resumed or evaluated.
    assert offered(page) == ["clone", "cancel"]
    assert page.text_content("[data-run-eta-label]") == "ETA"
    page.screenshot(path=str(studio.folder / "resumed-run-page.png"))
    assert not errors, errors
    page.context.close()


def test_actions_that_cannot_work_are_not_offered_and_viewers_get_none(browser, studio, world):
    page, errors = run_page(browser, studio, world["bare"], world["owner"])
    assert offered(page) == ["clone"]  # no checkpoint: nothing to resume from or to evaluate
    assert not errors, errors
    page.context.close()

    page, errors = run_page(browser, studio, world["done"], world["viewer"])
    assert page.locator("[data-run-action]").count() == 0
    assert not errors, errors
    page.context.close()

    page, errors = open_page(browser, studio, f"/share/{world['share']}/")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert page.locator("[data-run-action]").count() == 0
    wait_live_mark(page, "finished")
    assert not errors, errors
    page.context.close()


def test_a_run_that_ends_with_its_scoring_failed_says_so_at_once(browser, studio, world):
    page, errors = run_page(browser, studio, world["scoring"], world["owner"])
    wait_live_mark(page, "live")
    assert page.locator("[data-scoring-failed]").is_hidden()
    assert page.text_content("[data-run-eta-label]") == "ETA"
    assert offered(page) == ["clone", "cancel"]
    page.locator("[data-run-action=cancel]").click()
    page.locator("dialog[data-stop-dialog] [data-stop-choice=save]").click()  # the stop's choice, said plainly
    page.wait_for_function("document.querySelector('[data-action-answer]').textContent.startsWith('Stopping')")
    assert offered(page) == ["clone"]  # asked once: no second Stop

    script(studio, FINISH, world["scoring"])
    badge = page.locator("[data-scoring-failed]")
    badge.wait_for(state="visible", timeout=10_000)
    assert badge.inner_text() == "scoring failed · correct 16/16"
    warning = page.locator("[data-run-warning-text]").inner_text()
    assert warning.startswith("scoring failed: criterion 'correct' failed on 16 of the run's 16 rollouts (100%)")
    wait_live_mark(page, "finished")
    assert page.text_content("[data-run-state]") == "succeeded"
    assert page.text_content("[data-run-eta-label]") == "took"
    page.wait_for_function("document.querySelector('[data-run-action=cancel]').hidden", timeout=10_000)
    assert offered(page) == ["clone"]
    page.screenshot(
        path=str(studio.folder / "scoring-failed-run-page.png"), clip={"x": 0, "y": 0, "width": 1400, "height": 220}
    )

    # The runs list says it too.
    listed, list_errors = open_page(browser, studio, "/runs/", world["owner"])
    badge = listed.locator(f"#run-{world['scoring']} [data-scoring-failed]")
    assert badge.inner_text() == "scoring failed · correct 16/16"
    assert not errors + list_errors, errors + list_errors
    page.context.close()
    listed.context.close()


def test_the_runs_list_answers_in_the_row(browser, studio, world):
    page, errors = open_page(browser, studio, "/runs/", world["owner"])
    row = page.locator(f"#run-{world['gone']}")
    assert [b.get_attribute("value") for b in row.locator("button").all()] == ["resume", "evaluate", "clone"]
    assert page.locator(f"#run-{world['bare']} button[value=resume]").count() == 0

    row.locator("button[value=clone]").click()
    answer = row.locator("[data-action-answer]")
    answer.locator("a[data-new-run]").wait_for(timeout=10_000)
    assert answer.inner_text().startswith("Cloned as run #")

    script(studio, DROP_CHECKPOINTS, world["gone"])  # meanwhile, its checkpoint went
    row.locator("button[value=evaluate]").click()
    page.wait_for_function(
        f"document.querySelector('#run-{world['gone']} [data-action-answer]').textContent.includes('no checkpoint')"
    )
    assert answer.inner_text() == "run has no checkpoint to evaluate"
    assert "error" in answer.get_attribute("class")
    assert page.locator("ul.messages").count() == 0  # nothing at the top of the list
    page.screenshot(path=str(studio.folder / "runs-list-answers.png"))
    assert not errors, errors
    page.context.close()


def test_validation_charts_keep_their_place_before_their_first_point(browser, studio, world):
    page, errors = run_page(browser, studio, world["validating"], world["owner"])
    order = "[...document.querySelectorAll('[data-curves] [data-panel]')].map((p) => p.dataset.panel)"
    before = page.evaluate(order)
    assert before == ["reward", "val_reward", "val_criteria", "val_pass", "kl"]
    assert page.locator("[data-panel=val_reward] .chart-waiting").is_visible()

    script(studio, VAL_STEP, world["validating"])
    page.wait_for_function("document.querySelector('[data-panel=val_reward] .chart').data?.length > 0", timeout=10_000)
    assert page.evaluate(order) == before
    assert page.locator("[data-panel=val_reward] .chart-waiting").count() == 0
    assert not errors, errors
    page.context.close()
