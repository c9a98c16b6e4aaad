"""Long prompts and completions: stored once per run, capped in API answers, read in full in windows.

Who may read the full text: whoever may read the rollout (members of the run's team, a live share
link); an outsider gets 404, an anonymous request without a link 403.
"""

import pytest
from django.db.models import Sum, TextField
from django.db.models.functions import Cast, Length

from studio.runs.models import Rollout, RunPrompt
from studio.runs.texts import TEXT_CAP, WINDOW_MAX
from studio.sharing.models import ShareLink
from tests.studio.records import make_rollout
from tests.studio.runs.pages import url

BIG = 5_000_000  # the 5 MB prompt of the issue
QUESTION = "Which number comes next: 2, 4, 8?"
LONG_PROMPT = [{"role": "system", "content": "rule " * (BIG // 5)}, {"role": "user", "content": QUESTION}]


def stored_chars(model, field) -> int:
    """Characters the database holds in `field` over all rows (JSON text on both SQLite and PostgreSQL)."""
    return model.objects.aggregate(n=Sum(Length(Cast(field, TextField()))))["n"] or 0


def text_url(run, rollout, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/api/runs/{run.pk}/rollouts/{rollout.pk}/text/?{query}"


@pytest.fixture
def long_group(run):
    """One step's group of 8 completions of the 5 MB prompt, the first one 50,000 characters long."""
    return [
        make_rollout(
            run,
            step=1,
            prompt_id="p1",
            sample_index=i,
            prompt=LONG_PROMPT,
            completion=("y" * 50_000) if i == 0 else f"answer {i}",
        )  # fmt: skip
        for i in range(8)
    ]


def test_the_samples_of_a_prompt_share_one_stored_copy_of_it(run, long_group):
    for step in (2, 3):  # later steps draw the same row again
        make_rollout(run, step=step, prompt_id="p1@1", prompt=[dict(m) for m in LONG_PROMPT])
    assert Rollout.objects.filter(run=run).count() == 10
    assert RunPrompt.objects.filter(run=run).count() == 1
    # the prompt's text is in the database once: 5 MB, not 10 x 5 MB
    assert BIG <= stored_chars(RunPrompt, "content") < BIG * 1.01
    assert stored_chars(Rollout, "completion") < 60_000


def test_the_list_shows_the_start_of_the_last_user_message(api, alice, run, long_group):
    api.force_authenticate(alice)
    results = api.get(url(run)).json()["results"]
    assert {r["prompt_preview"] for r in results} == {QUESTION}


def test_the_detail_caps_each_text_and_says_what_was_cut(api, carol, run, long_group):
    api.force_authenticate(carol)
    response = api.get(f"/api/runs/{run.pk}/rollouts/{long_group[0].pk}/")
    body = response.json()
    assert body["truncated"] == {"prompt": BIG + len(QUESTION), "completion": 50_000}
    assert [len(m["content"]) for m in body["prompt"]] == [TEXT_CAP, len(QUESTION)]  # roles and the question kept
    assert [m["role"] for m in body["prompt"]] == ["system", "user"]
    assert body["completion"] == "y" * TEXT_CAP
    assert body["group"][0]["truncated"] == {"completion": 50_000} and len(body["group"][0]["completion"]) == TEXT_CAP
    assert body["group"][1]["truncated"] == {} and body["group"][1]["completion"] == "answer 1"
    assert len(response.content) < 8 * TEXT_CAP  # not 5 MB


def test_a_share_link_guest_gets_the_same_caps(api, alice, run, long_group):
    link = ShareLink.objects.create(run=run, created_by=alice)
    body = api.get(f"/api/runs/{run.pk}/rollouts/{long_group[0].pk}/?share={link.token}").json()
    assert body["truncated"] == {"prompt": BIG + len(QUESTION), "completion": 50_000}
    assert len(body["completion"]) == TEXT_CAP


def test_a_short_rollout_comes_whole_with_nothing_truncated(api, alice, run, rollout):
    api.force_authenticate(alice)
    body = api.get(f"/api/runs/{run.pk}/rollouts/{rollout.pk}/").json()
    assert (body["prompt"], body["completion"], body["truncated"]) == ("What is 6*7?", "42", {})


def test_the_full_text_comes_in_windows_that_add_up_to_the_field(api, carol, run, long_group):
    api.force_authenticate(carol)
    rollout = long_group[0]
    parts, offset = ["", ""], 0
    while offset is not None:
        body = api.get(text_url(run, rollout, field="prompt", offset=offset, limit=WINDOW_MAX)).json()
        assert body["chars"] == BIG + len(QUESTION) and [m["role"] for m in body["value"]] == ["system", "user"]
        parts = [have + m["content"] for have, m in zip(parts, body["value"], strict=True)]
        offset = body["next_offset"]
    assert parts == [m["content"] for m in LONG_PROMPT]
    body = api.get(text_url(run, rollout, field="completion", offset=49_990, limit=100)).json()
    assert (body["value"], body["next_offset"], body["chars"]) == ("y" * 10, None, 50_000)


@pytest.mark.parametrize(
    ("params", "field"),
    [({}, "field"), ({"field": "logprobs"}, "field"), ({"field": "prompt", "limit": WINDOW_MAX + 1}, "limit"),
     ({"field": "prompt", "limit": "all"}, "limit"), ({"field": "prompt", "offset": -1}, "offset")],
)  # fmt: skip
def test_a_bad_window_is_refused_naming_the_parameter(api, alice, run, rollout, params, field):
    api.force_authenticate(alice)
    response = api.get(text_url(run, rollout, **params))
    assert response.status_code == 400 and field in response.json()


def test_the_full_text_is_read_by_whoever_reads_the_rollout(api, carol, charlie, dana, alice, run, rollout):
    api.force_authenticate(carol)
    assert api.get(text_url(run, rollout, field="prompt")).json()["value"] == "What is 6*7?"
    for outsider in (charlie, dana):
        api.force_authenticate(outsider)
        assert api.get(text_url(run, rollout, field="prompt")).status_code == 404
    guest = api.__class__()
    assert guest.get(text_url(run, rollout, field="completion")).status_code == 403
    link = ShareLink.objects.create(run=run, created_by=alice)
    assert guest.get(text_url(run, rollout, field="completion", share=link.token)).json()["value"] == "42"
    link.revoke()
    assert guest.get(text_url(run, rollout, field="completion", share=link.token)).status_code == 404


def test_a_rollout_of_another_run_is_not_found_through_this_one(api, alice, team, run, rollout):
    other = run.__class__.objects.create(team=team, name="other", spec={})
    api.force_authenticate(alice)
    assert api.get(text_url(other, rollout, field="prompt")).status_code == 404


def test_text_search_finds_a_rollout_by_its_prompt_or_completion(api, alice, run, long_group):
    make_rollout(run, step=4, prompt_id="p4", prompt="Spell WOMBAT backwards", completion="tabmow")
    api.force_authenticate(alice)

    def found(q):
        return sorted((r["step"], r["sample_index"]) for r in api.get(url(run, q=q, limit=100)).json()["results"])

    assert found("wombat") == [(4, 0)]  # the prompt, any case
    assert found("TABMOW") == [(4, 0)]  # the completion
    assert found("comes next") == [(1, i) for i in range(8)]  # the end of a 5 MB prompt
    assert found("no such words") == []
