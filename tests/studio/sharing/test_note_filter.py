"""The rollout inspector's note filter: `has_note=1` (any note) and `note_tag=` (one tag).

Who sees what: a member reads every note of the team's runs; a share-link guest reads every
note of the one shared run (the notes list with `?share=`) and nothing of any other run. The
filter only ever counts notes of the run being listed, so it tells a guest nothing that
the shared run's notes list does not already show.
"""

import pytest

from studio.runs.models import Run
from studio.sharing.models import Note, ShareLink
from tests.studio.records import make_rollout


@pytest.fixture
def rollouts(run):
    return [make_rollout(run, step=i // 4, prompt_id=f"p{i // 4}", sample_index=i % 4, reward=i % 3) for i in range(12)]


@pytest.fixture
def noted(run, alice, bob, rollouts):
    """rollouts[1] and [6]: reward hacking (twice on [6]); [9]: format broken; and a note on the run itself."""
    for index, tag, author in ((1, "reward hacking", alice), (6, "reward hacking", bob), (6, "reward hacking", alice),
                               (9, "format broken", bob)):  # fmt: skip
        Note.objects.create(run=run, rollout=rollouts[index], author=author, tag=tag, text=f"look at {index}")
    Note.objects.create(run=run, author=alice, tag="question", text="on the whole run")
    return rollouts


def ids(api, run, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    resp = api.get(f"/api/runs/{run.pk}/rollouts/?limit=500&{query}")
    assert resp.status_code == 200, resp.content
    return sorted(r["id"] for r in resp.json()["results"])


def test_it_lists_rollouts_with_any_note_once_each(api, carol, run, noted):
    api.force_authenticate(carol)
    assert ids(api, run, has_note=1) == sorted(noted[i].pk for i in (1, 6, 9))  # [6] has two notes: listed once
    assert ids(api, run, has_note="false") == sorted(r.pk for r in noted)


def test_it_lists_rollouts_with_a_given_tag(api, carol, run, noted):
    api.force_authenticate(carol)
    assert ids(api, run, note_tag="reward%20hacking") == sorted(noted[i].pk for i in (1, 6))
    assert ids(api, run, note_tag="format%20broken", has_note=1) == [noted[9].pk]
    assert ids(api, run, note_tag="question") == []  # a note on the run marks no rollout
    assert ids(api, run, note_tag="good") == []


def test_the_note_filter_combines_with_other_filters_sorts_and_pages(api, carol, run, noted):
    api.force_authenticate(carol)
    body = api.get(f"/api/runs/{run.pk}/rollouts/?has_note=1&step_min=1&order=-reward&limit=1").json()
    first = body["results"][0]["id"]
    body = api.get(
        f"/api/runs/{run.pk}/rollouts/?has_note=1&step_min=1&order=-reward&limit=1&cursor={body['next_cursor']}"
    )
    second = body.json()["results"][0]["id"]
    want = sorted((noted[i] for i in (6, 9)), key=lambda r: (r.reward, r.pk), reverse=True)
    assert [first, second] == [r.pk for r in want] and body.json()["next_cursor"] is None


def test_a_deleted_note_stops_marking_its_rollout(api, alice, run, noted):
    api.force_authenticate(alice)
    for note in Note.objects.filter(rollout=noted[9]):
        assert api.delete(f"/api/notes/{note.pk}/").status_code == 204
    assert ids(api, run, has_note=1) == sorted(noted[i].pk for i in (1, 6))


def test_a_bad_flag_is_named(api, carol, run):
    api.force_authenticate(carol)
    assert "has_note" in api.get(f"/api/runs/{run.pk}/rollouts/?has_note=maybe").json()


def test_a_guest_finds_exactly_the_rollouts_of_the_notes_the_link_shows(api, alice, team, run, noted):
    # A teammate's run that is not shared, with its own notes, and a note that names the shared
    # run's rollout but belongs to the other run (the API refuses to write one; the database
    # does not stop it). The guest reads neither, so the filter must not count them.
    other = Run.objects.create(team=team, name="not shared", spec={})
    hidden = make_rollout(other, step=0)
    Note.objects.create(run=other, rollout=hidden, author=alice, tag="secret", text="internal")
    Note.objects.create(run=other, rollout=noted[0], author=alice, tag="secret", text="stray")
    link = ShareLink.objects.create(run=run, created_by=alice)
    guest = api.__class__()
    shown = guest.get(f"/api/runs/{run.pk}/notes/?share={link.token}").json()["results"]
    assert {n["tag"] for n in shown} == {"reward hacking", "format broken", "question"}

    assert ids(guest, run, has_note=1, share=link.token) == sorted({n["rollout"] for n in shown if n["rollout"]})
    assert ids(guest, run, note_tag="secret", share=link.token) == []
    assert guest.get(f"/api/runs/{other.pk}/rollouts/?note_tag=secret&share={link.token}").status_code == 404


def test_a_revoked_link_and_an_outsider_get_404_with_the_note_filter(api, alice, charlie, run, noted):
    link = ShareLink.objects.create(run=run, created_by=alice)
    link.revoke()
    guest = api.__class__()
    assert guest.get(f"/api/runs/{run.pk}/rollouts/?has_note=1&share={link.token}").status_code == 404
    api.force_authenticate(charlie)
    assert api.get(f"/api/runs/{run.pk}/rollouts/?note_tag=reward%20hacking").status_code == 404


def test_the_run_page_and_the_share_page_offer_the_note_filter_and_the_new_sorts(client, alice, run):
    link = ShareLink.objects.create(run=run, created_by=alice)
    shared = client.get(link.path).content.decode()
    client.force_login(alice)
    own = client.get(f"/runs/{run.pk}/").content.decode()
    for html in (own, shared):
        assert '<select name="note"' in html and '<option value="*">with any note</option>' in html
        assert '<option value="reward hacking">tagged reward hacking</option>' in html
        for order in ("-num_tokens", "num_tokens", "-advantage", "advantage"):
            assert f'<option value="{order}">' in html
