"""The rollout inspector's API: filters, keyset pages, the detail with its group, and who may read."""

import re

import pytest

from studio.runs.models import Rollout, RolloutScore
from studio.sharing.models import ShareLink
from tests.studio.records import prompt_of
from tests.studio.runs.pages import url, walk


def make(run, step, sample, reward, finish="stop", text="the answer is 4", correct=None, prompt_id=None):
    correct = reward if correct is None else correct
    rollout = Rollout.objects.create(
        run=run,
        step=step,
        prompt_id=prompt_id or f"p{step}",
        sample_index=sample,
        run_prompt=prompt_of(run, [{"role": "user", "content": f"question {step}"}]),
        completion=text,
        preview=text[:200],
        reward=reward,
        finish_reason=finish,
        scores={"correct": {"score": correct, "explanation": "checked", "error": None}},
    )
    RolloutScore.objects.create(rollout=rollout, run=run, criterion="correct", score=correct)
    return rollout


@pytest.fixture
def rows(run):
    return [make(run, step, sample, reward=float((step + sample) % 3)) for step in range(10) for sample in range(4)]


def test_pages_walk_every_rollout_newest_first_without_repeats(api, alice, run, rows):
    api.force_authenticate(alice)
    ids = walk(api, run, order="-step", limit=7)
    assert ids == [r.pk for r in sorted(rows, key=lambda r: (r.step, r.pk), reverse=True)]


def test_without_an_order_the_list_is_newest_first_as_the_inspector_shows_it(api, alice, run, rows):
    api.force_authenticate(alice)
    newest_first = [r.pk for r in sorted(rows, key=lambda r: (r.step, r.pk), reverse=True)]
    assert walk(api, run, limit=7) == walk(api, run, order="-step", limit=7) == newest_first


def test_sorting_by_reward_pages_through_ties_in_id_order(api, alice, run, rows):
    api.force_authenticate(alice)
    ids = walk(api, run, order="reward", limit=5)
    assert ids == [r.pk for r in sorted(rows, key=lambda r: (r.reward, r.pk))]


def test_filters_combine(api, alice, run, rows):
    make(run, 5, 9, reward=2.0, finish="length", text="truncated output")
    api.force_authenticate(alice)
    body = api.get(url(run, step_min=3, step_max=6, reward_min=2, finish_reason="length")).json()
    assert [(r["step"], r["sample_index"], r["finish_reason"]) for r in body["results"]] == [(5, 9, "length")]


def test_the_trained_filter_separates_dropped_and_surplus_groups_from_the_trained_ones(api, alice, run, rows):
    Rollout.objects.filter(run=run, step=4).update(trained=False, advantage=0.0)
    api.force_authenticate(alice)
    untrained = api.get(url(run, trained="0", limit=200)).json()["results"]
    assert {(r["step"], r["trained"]) for r in untrained} == {(4, False)} and len(untrained) == 4
    assert len(api.get(url(run, trained="1", limit=200)).json()["results"]) == len(rows) - 4
    response = api.get(url(run, trained="maybe"))
    assert response.status_code == 400 and "trained" in response.json()


def test_criterion_score_filter(api, alice, run, rows):
    api.force_authenticate(alice)
    body = api.get(url(run, criterion="correct", score_min=2, limit=200)).json()
    assert body["results"] and all(r["scores"]["correct"] >= 2 for r in body["results"])
    assert len(body["results"]) == sum(1 for r in rows if r.reward >= 2)


def test_text_search_reads_the_whole_completion(api, alice, run, rows):
    make(run, 2, 7, reward=0.0, text="x" * 300 + " needle at the end")
    api.force_authenticate(alice)
    body = api.get(url(run, q="NEEDLE")).json()
    assert [r["sample_index"] for r in body["results"]] == [7]


def test_text_search_reads_prompts_too_as_the_page_says(api, alice, client, run, rows):
    # Prompts are matched on the run's few distinct RunPrompt rows, then rollouts by reference:
    # the list shows each rollout's prompt, so its words must find it.
    api.force_authenticate(alice)
    body = api.get(url(run, q="QUESTION 3", limit=100)).json()
    assert sorted((r["step"], r["sample_index"]) for r in body["results"]) == [(3, s) for s in range(4)]
    assert {r["prompt_preview"] for r in body["results"]} == {"question 3"}
    client.force_login(alice)
    search_box = re.search(r'<input type="search" name="q"[^>]*>', client.get(f"/runs/{run.pk}/").content.decode())
    assert 'placeholder="search prompts and completions"' in search_box.group(0)


def test_the_detail_carries_the_full_text_scores_and_group(api, carol, run, rows):
    api.force_authenticate(carol)
    one = rows[5]
    body = api.get(f"/api/runs/{run.pk}/rollouts/{one.pk}/").json()
    assert body["completion"] == "the answer is 4"
    assert body["scores"]["correct"]["explanation"] == "checked"
    assert [g["sample_index"] for g in body["group"]] == [0, 1, 2, 3]
    assert all("completion" in g for g in body["group"])


def test_an_outsider_gets_404_and_a_share_link_reads(api, charlie, alice, run, rows):
    api.force_authenticate(charlie)
    assert api.get(url(run)).status_code == 404
    assert api.get(f"/api/runs/{run.pk}/rollouts/{rows[0].pk}/").status_code == 404
    link = ShareLink.objects.create(run=run, created_by=alice)
    guest = api.__class__()
    assert len(guest.get(url(run, share=link.token)).json()["results"]) == 40
    link.revoke()
    assert guest.get(url(run, share=link.token)).status_code == 404


def test_bad_parameters_are_named(api, alice, run):
    api.force_authenticate(alice)
    assert "order" in api.get(url(run, order="best")).json()
    assert "cursor" in api.get(url(run, cursor="nonsense")).json()
    assert "step_min" in api.get(url(run, step_min="x")).json()


def test_the_prompt_filter_finds_a_rows_rollouts_with_its_repeats_in_a_step_and_nothing_else(api, alice, run):
    # "a@2" is row a drawn a second time in step 1; "ab", "A" and "xa@2" are other rows.
    want = [
        make(run, 1, 0, 1.0, prompt_id="a"),
        make(run, 1, 1, 0.0, prompt_id="a@2"),
        make(run, 4, 0, 1.0, prompt_id="a"),
    ]
    for pid in ("ab", "A", "xa@2", "b"):
        make(run, 2, 0, 1.0, prompt_id=pid)
    api.force_authenticate(alice)
    assert sorted(walk(api, run, prompt="a", limit=2)) == sorted(r.pk for r in want)
    assert walk(api, run, prompt="a", prompt_id="a@2") == [want[1].pk]  # one group of it
