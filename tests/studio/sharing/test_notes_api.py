"""Notes on a run and on its rollouts: members read them, owners and editors write them."""

from studio.runs.models import Run
from studio.sharing.models import Note
from tests.studio.records import make_rollout


def notes_url(run):
    return f"/api/runs/{run.pk}/notes/"


def test_an_editor_notes_a_run_and_everyone_in_the_team_reads_it(api, bob, carol, run):
    api.force_authenticate(bob)
    resp = api.post(notes_url(run), {"text": "KL climbs after step 40", "tag": "question"}, format="json")
    assert resp.status_code == 201
    assert resp.json()["author"] == "bob" and resp.json()["rollout"] is None
    api.force_authenticate(carol)
    notes = api.get(notes_url(run)).json()["results"]
    assert [(n["text"], n["tag"], n["can_delete"]) for n in notes] == [("KL climbs after step 40", "question", False)]


def test_a_rollout_note_carries_the_rollout_and_its_step(api, alice, run, rollout):
    api.force_authenticate(alice)
    resp = api.post(
        notes_url(run),
        {"text": "answers 42 to everything", "tag": "reward hacking", "rollout": rollout.pk},
        format="json",
    )
    assert resp.status_code == 201
    assert resp.json()["rollout"] == rollout.pk
    assert resp.json()["rollout_step"] == 3


def test_notes_filter_by_rollout_tag_and_text(api, alice, run, rollout):
    Note.objects.create(run=run, author=alice, text="format is off", tag="format broken", rollout=rollout)
    Note.objects.create(run=run, author=alice, text="looks fine overall", tag="")
    api.force_authenticate(alice)
    texts = lambda **q: [n["text"] for n in api.get(notes_url(run), q).json()["results"]]  # noqa: E731
    assert texts(rollout=rollout.pk) == ["format is off"]
    assert texts(tag="format broken") == ["format is off"]
    assert texts(q="FINE") == ["looks fine overall"]
    assert sorted(texts()) == ["format is off", "looks fine overall"]


def test_a_viewer_cannot_write_a_note(api, carol, run):
    api.force_authenticate(carol)
    assert api.post(notes_url(run), {"text": "hi"}, format="json").status_code == 403
    assert not Note.objects.exists()


def test_an_outsider_neither_reads_nor_writes_notes(api, charlie, run):
    api.force_authenticate(charlie)
    assert api.get(notes_url(run)).status_code == 404
    assert api.post(notes_url(run), {"text": "hi"}, format="json").status_code == 404


def test_it_refuses_a_rollout_of_another_run(api, alice, run, team):
    other = Run.objects.create(team=team, name="other", spec={})
    foreign = make_rollout(other)
    api.force_authenticate(alice)
    resp = api.post(notes_url(run), {"text": "x", "rollout": foreign.pk}, format="json")
    assert resp.status_code == 400
    assert f"has no rollout {foreign.pk}" in resp.json()["rollout"]


def test_it_refuses_an_empty_note(api, alice, run):
    api.force_authenticate(alice)
    resp = api.post(notes_url(run), {"text": "  "}, format="json")
    assert resp.status_code == 400
    assert "text" in resp.json()


def test_the_author_and_a_team_owner_delete_a_note_but_another_editor_does_not(
    api, alice, bob, team, run, django_user_model
):
    other_editor = django_user_model.objects.create_user("frank", password="pw-frank-123")
    team.add_member(other_editor, "editor")
    first = Note.objects.create(run=run, author=bob, text="mine")
    second = Note.objects.create(run=run, author=bob, text="also mine")
    api.force_authenticate(other_editor)
    assert api.delete(f"/api/notes/{first.pk}/").status_code == 403
    api.force_authenticate(bob)
    assert api.delete(f"/api/notes/{first.pk}/").status_code == 204
    api.force_authenticate(alice)
    assert api.delete(f"/api/notes/{second.pk}/").status_code == 204
    assert not Note.objects.exists()


def test_an_outsider_cannot_delete_a_note(api, charlie, bob, run):
    note = Note.objects.create(run=run, author=bob, text="mine")
    api.force_authenticate(charlie)
    assert api.delete(f"/api/notes/{note.pk}/").status_code == 404
    assert Note.objects.filter(pk=note.pk).exists()


def test_a_rollout_filter_that_is_not_an_id_is_named(api, alice, run):
    api.force_authenticate(alice)
    resp = api.get(notes_url(run), {"rollout": "x"})
    assert resp.status_code == 400 and "rollout" in resp.json()
