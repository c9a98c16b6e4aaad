"""What a new user does, in a real browser against a real studio (daphne, a Celery worker,
Redis, SQLite): sign in, upload a dataset, make a rubric and try it, create an experiment
from a preset, launch it, watch curve points arrive while it trains, open a rollout, add a
note, and open a share link in a fresh browser context.

The model is a tiny one built locally (no downloads); the run is a dozen short steps on CPU.
"""

import json
import re
import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, LiveStudio, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

USER, PASSWORD = "nina", "pw-nina-12345"
CREATE_USER = f"""
from django.contrib.auth import get_user_model
from studio.accounts.models import OWNER, Team
user = get_user_model().objects.create_user({USER!r}, password={PASSWORD!r})
Team.objects.create(name="Nina's lab").add_member(user, OWNER)
"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    live = LiveStudio(tmp_path_factory.mktemp("studio")).start(worker=True)
    yield live
    live.stop()


@pytest.fixture(scope="module")
def files(studio, tmp_path_factory):
    """A new user's account (made by an admin), a tiny local model and a JSONL dataset on disk,
    outside the studio's data folder (which runs may not read from, but for their own outputs)."""
    subprocess.run([sys.executable, "manage.py", "shell", "-c", CREATE_USER], cwd=ROOT, env=studio.env, check=True)
    home = tmp_path_factory.mktemp("user-files")
    model = home / "tiny-model"
    build = "import sys; from trainers.demos.tiny import build_tiny_model; build_tiny_model(sys.argv[1])"
    subprocess.run([sys.executable, "-c", build, str(model)], cwd=ROOT, env=studio.env, check=True)
    data = home / "letters.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Repeat the letter: {c}", "answer": c}) + "\n" for c in "abcd"))
    return {"model": model, "data": data}


def test_a_new_user_trains_a_model_and_shares_the_run(browser, studio, files, tmp_path):
    base = studio.base_url
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("dialog", lambda dialog: dialog.accept())

    # Sign in.
    studio.sign_in(page, USER, PASSWORD)

    # Upload a dataset.
    page.goto(f"{base}/datasets/")
    page.get_by_label("Name").fill("letters")
    page.locator("input[name=file]").set_input_files(str(files["data"]))
    page.get_by_role("button", name="Add dataset").click()
    page.wait_for_url(re.compile(r".*/datasets/\d+/$"))
    assert "letters" in page.content()

    # Make a rubric (the new-rubric form starts with one exact_match criterion) and try it.
    page.goto(f"{base}/rubrics/new/")
    page.locator("input[name=name]").fill("exact letter")
    page.locator("[name=try_prompt]").fill("Repeat the letter: a")
    page.locator("[name=try_answer]").fill("a")
    page.locator("[name=try_completions]").fill("a\n---\nb")
    page.get_by_role("button", name="Score").click()
    tried = page.locator("table.table tbody tr")
    tried.first.wait_for(timeout=60_000)  # scored by the Celery worker
    assert tried.count() == 2
    assert tried.nth(0).locator("td").nth(1).text_content().strip().startswith("1")
    assert tried.nth(1).locator("td").nth(1).text_content().strip().startswith("0")
    page.get_by_role("button", name="Save rubric").click()
    page.wait_for_url(re.compile(r".*/rubrics/\d+/$"))

    # Create an experiment from the GRPO preset, made small enough for a CPU.
    page.goto(f"{base}/experiments/new/")
    page.locator("input[name=name]").fill("letters-grpo")
    page.get_by_label("Model (local folder or hub id)").fill(str(files["model"]))
    page.locator("#preset").select_option("grpo")
    page.locator("details[data-group=optim] > summary").click()  # the learning rate's collapsed section
    for name, value in {
        "algorithm.group_size": "4",
        "optim.prompts_per_step": "4",
        "optim.micro_batch_size": "16",
        "optim.total_steps": "12",
        "optim.lr": "0.001",
        "rollout.max_new_tokens": "6",
    }.items():
        page.locator(f"[name='{name}']").fill(value)
    page.get_by_role("button", name="Save experiment").click()
    page.wait_for_url(re.compile(r".*/experiments/\d+/$"))

    # Launch: the studio opens the run page.
    page.get_by_role("button", name="Launch training run").click()
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run_url = page.url
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)

    # Curve points appear while it trains (live, over the websocket).
    page.wait_for_function(
        "document.querySelector('[data-panel=reward] .chart')?.data?.find((t) => t.name)?.x.length >= 2",
        timeout=150_000,
    )
    # "finished" once the run has ended (a loaded machine may get there before this line), with the socket open.
    assert page.text_content("[data-live-state]") in ("live", "finished")

    # Open a rollout from the inspector with the keyboard.
    page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]", timeout=30_000)
    page.locator("body").press("j")
    page.locator("body").press("Enter")
    page.wait_for_selector(".rollout-detail .completion")
    assert "Repeat the letter" in page.locator(".rollout-detail .prompt").text_content()
    assert page.locator(".rollout-detail .sibling").count() == 4  # the group side by side

    # Add a note to it.
    detail = page.locator(".rollout-detail")
    detail.locator(".quick-tags button", has_text="format broken").click()
    detail.locator("textarea[name=text]").fill("repeats the prompt instead of the letter")
    detail.locator("button[type=submit]").click()
    page.wait_for_selector("[data-notes-panel] .note:has-text('repeats the prompt')")
    page.keyboard.press("Escape")
    page.screenshot(path=str(tmp_path / "new-user-run-page.png"))

    # Share it and open the link in a fresh browser context (no session).
    page.click("[data-share-create]")
    share_url = page.locator(".share-url input").first.input_value()
    guest = browser.new_context(viewport={"width": 1366, "height": 900})
    guest_page = guest.new_page()
    guest_page.goto(share_url)
    guest_page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert guest_page.locator("[data-readonly-banner]").is_visible()
    guest_page.wait_for_function(
        "document.querySelector('[data-panel=reward] .chart')?.data?.find((t) => t.name)?.x.length >= 1"
    )
    assert guest_page.locator("[data-notes-panel] .note", has_text="repeats the prompt").count() == 1
    assert guest_page.goto(run_url).url.endswith(f"/login/?next=/runs/{run_url.rstrip('/').split('/')[-1]}/")
    guest.close()

    assert not errors, errors
    context.close()
