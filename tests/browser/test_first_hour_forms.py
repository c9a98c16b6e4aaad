"""The forms a new user meets in the first hour, in a real browser against a real studio
(daphne, a Celery worker, Redis, SQLite): the new-experiment form leads with the preset and
keeps its marks and step cost live, a new team member starts as a viewer, and a try-it error
shows once."""

import re

import pytest

from studio.experiments.forms import EXPERIMENT_SECTIONS
from studio.experiments.layout import StepCost
from tests.browser.live_studio import LiveStudio, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

USER, PASSWORD = "tess", "pw-tess-12345"
SETUP = f"""
from django.contrib.auth import get_user_model
from studio.accounts.models import OWNER, Team
users = get_user_model().objects
Team.objects.create(name="Tess's lab").add_member(users.create_user({USER!r}, password={PASSWORD!r}), OWNER)
users.create_user("omar", password="pw-omar-12345")
"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    live = LiveStudio(tmp_path_factory.mktemp("studio")).start(worker=True)
    live.shell(SETUP)
    yield live
    live.stop()


@pytest.fixture
def page(browser, studio):
    page, errors = studio.signed_in_page(browser, USER, PASSWORD)
    yield page
    assert not errors, errors
    page.context.close()


def cost(page, part: str) -> str:
    return page.locator(f"[data-step-cost] [data-cost={part}]").text_content()


def test_the_new_experiment_form_leads_with_the_preset_and_keeps_marks_and_step_cost_live(page, studio):
    page.goto(f"{studio.base_url}/experiments/new/")
    form = page.locator("[data-experiment-form]")
    assert form.locator("input:not([type=hidden]), select, textarea").first.get_attribute("id") == "preset"
    assert form.locator("label", has_text=re.compile(r"^\s*preset", re.I)).count() == 1
    assert page.locator("#preset").input_value() == "grpo"

    # What the preset sets is open and filled in; the rest is in collapsed sections that expand.
    in_preset = page.locator("[data-group=preset] [data-field]")
    assert "algorithm.kl_beta" in in_preset.evaluate_all("els => els.map(e => e.dataset.field)")
    assert page.locator("[name='algorithm.kl_beta']").input_value() == "0.04"
    sections = page.locator("details[data-group]")
    assert sections.count() == len(EXPERIMENT_SECTIONS) and page.locator("details[data-group][open]").count() == 0
    lr = page.locator("[name='optim.lr']")
    assert not lr.is_visible()
    page.locator("details[data-group=optim] > summary").click()
    assert lr.is_visible()

    # A field changed away from the preset is marked, says what the preset gives, and is counted.
    lr.fill("0.001")
    lr_field = page.locator("[data-field='optim.lr']")
    assert "changed" in lr_field.get_attribute("class")
    assert lr_field.locator("[data-changed-note]").text_content().split() == ["changed", "from", "preset:", "1e-06"]
    assert page.locator("details[data-group=optim] [data-changed-count]").text_content() == "1 changed"
    kl_beta = page.locator("[name='algorithm.kl_beta']")
    kl_beta.fill("0.1")
    assert "changed" in page.locator("[data-field='algorithm.kl_beta']").get_attribute("class")
    kl_beta.fill("0.040")  # the preset's value again, written differently
    assert "changed" not in page.locator("[data-field='algorithm.kl_beta']").get_attribute("class")

    # The step cost follows the group size, as the server computes it.
    assert (cost(page, "completions"), cost(page, "generated")) == ("64", "4,096")
    page.locator("[name='algorithm.group_size']").fill("4")
    expected = StepCost(prompts=8, group=4, new_tokens=64, prompt_tokens=512).shown
    assert {part: cost(page, part) for part in ("completions", "generated", "trained")} == {
        part: expected[part] for part in ("completions", "generated", "trained")
    }

    # Another preset: its settings move up and are filled in, dynamic sampling's rounds are counted.
    page.locator("#preset").select_option("dapo")
    assert page.locator("[name='algorithm.preset']").input_value() == "dapo"
    assert page.locator("[data-group=preset] [name='algorithm.dynamic_sampling']").is_checked()
    assert kl_beta.input_value() == "0.0"
    assert page.locator("[data-group=preset] [name='algorithm.kl_estimator']").count() == 0  # grpo's, not dapo's
    dapo = StepCost(prompts=8, group=4, new_tokens=64, prompt_tokens=512, rounds=4).shown
    assert (cost(page, "generated"), cost(page, "rounds")) == (dapo["generated"], "4")
    assert page.locator("[data-cost-part=rounds]").is_visible()
    assert "changed" in lr_field.get_attribute("class")  # dapo leaves lr at its default too


def test_a_new_team_member_starts_as_a_viewer(page, studio):
    page.goto(f"{studio.base_url}/teams/")
    assert page.locator("select[name=role]").input_value() == "viewer"
    page.locator("input[name=username]").fill("omar")
    page.get_by_role("button", name="Add or change member").click()
    page.wait_for_selector("td:text-is('omar')")
    assert page.locator("tr", has=page.locator("td:text-is('omar')")).locator("td").nth(1).text_content() == "viewer"


def test_a_criterion_that_raises_shows_its_error_once_in_try_it(page, studio):
    page.goto(f"{studio.base_url}/rubrics/new/")
    page.locator("input[name=name]").fill("raises")  # required: the kind change submits the form
    page.locator("select[name='c0.kind']").select_option("python")  # the form refreshes with python's fields
    page.wait_for_selector("textarea[name='c0.params.code']")
    page.locator("textarea[name='c0.params.code']").fill(
        "def score(prompt, completion, **fields):\n    raise RuntimeError('boom-at-scoring')\n"
    )
    page.locator("[name=try_completions]").fill("a")
    page.get_by_role("button", name="Score").click()
    page.locator("table.table tbody tr").first.wait_for(timeout=60_000)  # scored by the Celery worker
    shown = page.locator("table.table td div", has_text="boom-at-scoring")
    assert shown.count() == 1  # not again as the criterion's explanation
    assert "error" in shown.get_attribute("class")


USED_MODEL = """
from studio.accounts.models import Team
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
team = Team.objects.get(name="Tess's lab")
rubric = Rubric.objects.create(team=team, name="exact", spec={"criteria": [{"name": "c", "kind": "exact_match"}]})
Experiment.objects.create(team=team, name="earlier", rubric=rubric, model_path="/models/used-before", config={})
"""


def test_the_model_field_shows_the_models_known_here_before_it_is_focused(page, studio):
    # Issue 39: a new experiment's model field looked empty; its choices (a datalist) showed only on focus.
    studio.shell(USED_MODEL)
    page.goto(f"{studio.base_url}/experiments/new/")
    model = page.locator("[name=model_path]")
    assert model.input_value() == "" and model.get_attribute("placeholder").startswith("pick one below")
    offered = page.locator("[data-known-models] [data-use-model='/models/used-before']")
    assert offered.is_visible() and not model.evaluate("el => el === document.activeElement")
    offered.click()
    assert model.input_value() == "/models/used-before"
