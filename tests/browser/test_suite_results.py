"""A suite run's result page in a real browser, on a suite run written by the test (no worker): the heatmap and
the table of models x tasks with each interval, the change against the base model and the best model per task
marked; a cell opens its own samples in the inspector (the pair's evaluation run), no other cell's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

SETUP = """
import json
import django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from studio.accounts.models import VIEWER, Team
from studio.evaluations.models import SuiteResult, SuiteRun
from studio.runs.models import Run
from trainers.report import CriterionScore, Rollout
from workers.reporting import DatabaseReporter

vera = get_user_model().objects.create_user("vera", password="pw-vera-123")
team = Team.objects.create(name="Reasoning")
team.add_member(vera, VIEWER)
s = SessionStore()
s[SESSION_KEY], s[BACKEND_SESSION_KEY] = str(vera.pk), "django.contrib.auth.backends.ModelBackend"
s[HASH_SESSION_KEY] = vera.get_session_auth_hash()
s.create()
suite_run = SuiteRun.objects.create(team=team, name="core on grpo", spec={})
scores = {("base", "sums"): 0.25, ("base", "words"): 0.75, ("step 10", "sums"): 0.5, ("step 10", "words"): 0.5}
cells = {}
for i, model in enumerate(("base", "step 10")):
    for j, task in enumerate(("sums", "words")):
        run = Run.objects.create(team=team, kind="eval", name=f"{model} on {task}", state="succeeded", spec={},
                                 total_steps=1)
        reporter = DatabaseReporter(run.pk)
        reporter.rollouts(0, [Rollout(step=0, prompt_id=str(p), sample_index=k, prompt=f"{task} prompt {p}",
                                      completion=f"{model}/{task}/{p}.{k}", reward=1.0 if k == 0 else 0.0,
                                      scores={"ok": CriterionScore(1.0 if k == 0 else 0.0)},
                                      trained=False, split="eval")  # as trainers.run.evaluate reports them
                              for p in range(2) for k in range(2)])
        reporter.flush()
        v = scores[(model, task)]
        SuiteResult.objects.create(
            suite_run=suite_run, run=run, model_index=i, model_label=model, checkpoint="" if i == 0 else "/ck/step-10",
            step=None if i == 0 else 10, task_index=j, task=task, k=2, num_prompts=2, reward_mean=v,
            reward_mean_low=v - 0.2, reward_mean_high=v + 0.2, pass_at_1=v, pass_at_1_low=v - 0.25,
            pass_at_1_high=v + 0.25, pass_at_k=1.0, pass_at_k_low=1.0, pass_at_k_high=1.0)
        cells[f"{model}/{task}"] = run.pk
print(json.dumps({"session": s.session_key, "suite_run": suite_run.pk, "cells": cells}))
"""


@pytest.fixture(scope="module")
def world(studio):
    done = subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=studio.env, check=True, capture_output=True,
                          text=True)  # fmt: skip
    return json.loads(done.stdout)


def test_the_table_shows_each_cell_and_a_cell_opens_its_own_samples(browser, studio, world):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": world["session"], "url": studio.base_url}])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{studio.base_url}/suite-runs/{world['suite_run']}/")
    page.wait_for_selector("[data-suite-heatmap] .main-svg", timeout=30_000)  # plotly drew the heatmap
    rows = page.locator("[data-suite-table] tbody tr")
    assert rows.count() == 2
    trained = page.locator('[data-suite-table] tr[data-model="step 10"] td[data-task="sums"]')
    assert trained.locator("[data-pass1]").inner_text() == "0.500"
    assert "[0.250, 0.750]" in trained.inner_text()
    assert trained.locator("[data-delta]").first.inner_text() == "+0.250"  # against the base model's 0.25
    best = page.locator("td[data-best]")
    assert [best.nth(i).get_attribute("data-task") for i in range(best.count())] == ["words", "sums"]
    assert "★" in page.locator('tr[data-model="base"] td[data-task="words"]').inner_text()
    assert page.locator("[data-suite-heatmap] text", has_text="★ 0.50").count() >= 1
    trained.locator("[data-cell-link]").click()
    page.wait_for_url(f"**/runs/{world['cells']['step 10/sums']}/**")
    page.wait_for_selector("tr[data-rollout-id]", timeout=30_000)
    listed = page.locator("[data-rollout-list]").inner_text()
    assert "step 10/sums/" in listed
    assert "base/" not in listed and "/words/" not in listed
    # Shown as evaluation samples (the run's own split, which its list opens on), never as training ones.
    assert page.locator("tr[data-rollout-id] .tag.split-eval").count() == 4
    assert page.locator("select[name=split]").input_value() == "eval"
    assert errors == []
