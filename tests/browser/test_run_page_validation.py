"""Validation during training on the run page, in a real browser while the run reports: the val/
curves have their panels beside the training ones, the inspector lists training rollouts by
default, and its split filter lists the validation rollouts (live ones included), marked as such."""

import subprocess
import sys

import pytest

from tests.browser.live_studio import ROOT, requires_chromium
from tests.browser.test_run_page_episodes import filter_by
from tests.browser.test_run_page_live import owner_page, points_in

pytestmark = [pytest.mark.slow, requires_chromium]

HISTORY, TOTAL, INTERVAL = 8, 300, 0.5
ROWS = ".rollout-list tbody tr[data-rollout-id]"
# A run in the synthetic run's team with only its step-0 validation written (what a run shows before its
# first training step); then, for each line read, a training step. Prints its id.
VALIDATED_FIRST = """
import random, sys, time
from tests.browser.synthetic_run import Run, report_step, validation_at
from studio.runs.events import record
from studio.runs.models import Rollout
source = Run.objects.order_by("pk").first()
run = Run.objects.create(team=source.team, name="validated first", spec=source.spec, state="running",
                         total_steps=10, created_by=source.created_by)
values, rows = validation_at(run, 0, random.Random(1))
rows = Rollout.objects.bulk_create(rows)
record(run.pk, [("metrics", 0, {"values": values}), ("rollouts", 0, {"items": [r.summary() for r in rows]})])
print(run.pk, flush=True)
for line in sys.stdin:
    report_step(run, int(line), 10, random.Random(2), time.time())
    print("done", flush=True)
"""


@pytest.fixture(scope="module")
def live_run(studio):
    with studio.synthetic_run(HISTORY, TOTAL, INTERVAL, validation=True) as run:
        yield run


def listed(page) -> list[dict]:
    return page.evaluate(
        "studioRunPage.rollouts.items.map(({id, step, split, trained}) => ({id, step, split, trained}))"
    )


def test_the_val_curves_have_their_panels_beside_the_training_ones(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    for panel in ("val_reward", "val_criteria", "val_pass"):
        assert points_in(page, panel) >= HISTORY // 2, panel  # validated every second step
    order = page.evaluate("[...document.querySelectorAll('[data-curves] [data-panel]')].map((el) => el.dataset.panel)")
    assert order.index("val_reward") == order.index("reward") + 1
    names = page.evaluate("document.querySelector('[data-panel=val_pass] .chart').data.map((t) => t.name)")
    assert {"val/pass@1", "val/pass@4"} <= set(names)
    assert not errors, errors
    page.context.close()


def test_the_split_filter_lists_validation_rollouts_and_the_default_lists_training_ones(browser, studio, live_run):
    page, errors = owner_page(browser, studio, live_run)
    page.wait_for_selector(ROWS)
    assert page.locator("form.filters [name=split]").input_value() == "train"
    rows = listed(page)
    assert rows and {r["split"] for r in rows} == {"train"}
    assert page.locator(f"{ROWS} .tag.split-validation").count() == 0

    filter_by(page, split="validation")
    rows = listed(page)
    assert rows and {r["split"] for r in rows} == {"validation"} and not any(r["trained"] for r in rows)
    assert {r["step"] % 2 for r in rows} == {0}
    assert page.locator(f"{ROWS} .tag.split-validation").count() == len(rows)
    # live validation rollouts keep arriving under the filter, and no training one slips in
    top = "Number(document.querySelector('.rollout-list tbody tr').dataset.rolloutId)"
    listed_top = page.evaluate(top)
    page.wait_for_function(f"{top} > {listed_top}", timeout=20_000)
    assert {r["split"] for r in listed(page)} == {"validation"}
    page.locator(ROWS).first.click()
    page.wait_for_selector(".rollout-detail .detail-head .tag.split-validation")
    assert "Held out" in page.locator(".rollout-detail .prompt").text_content()
    assert page.locator(".rollout-detail .sibling").count() == 4  # the group: its k samples, no training ones

    filter_by(page, split="all", step_min="4", step_max="4")  # one validated step: 32 training + 12 validation
    assert sorted(r["split"] for r in listed(page)) == ["train"] * 32 + ["validation"] * 12
    assert not errors, errors
    page.context.close()


def test_a_run_with_only_validation_rollouts_opens_the_list_on_both_splits(browser, studio, live_run):
    # Issue 39: the list opened on the training split and said "No rollouts yet" over 12 validation rollouts.
    writer = subprocess.Popen([sys.executable, "-c", VALIDATED_FIRST], cwd=ROOT, env=studio.env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        run_id = int(writer.stdout.readline())
        page, errors = owner_page(browser, studio, {**live_run, "run": run_id})
        page.wait_for_selector(ROWS)
        assert page.locator("form.filters [name=split]").input_value() == "all"
        rows = listed(page)
        assert len(rows) == 12 and {r["split"] for r in rows} == {"validation"}
        # The first training step's rollouts join the list live, under the same filter.
        writer.stdin.write("1\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "done"
        page.wait_for_function("studioRunPage.rollouts.items.some((r) => r.split === 'train')", timeout=20_000)
        assert page.locator(f"{ROWS} .tag.split-validation").count() == 12
        assert not errors, errors
        page.context.close()
    finally:
        writer.stdin.close()
        writer.wait(timeout=10)
