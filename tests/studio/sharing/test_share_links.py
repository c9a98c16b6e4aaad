"""Read-only share links: anyone holding a live link reads one run (page, curves, rollouts'
notes, websocket); owners and editors create and revoke them; a revoked link stops at once."""

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from studio.runs.live.routing import websocket_urlpatterns
from studio.runs.models import MetricPoint, Run
from studio.sharing.models import ShareLink
from tests.studio import people


def links_url(run):
    return f"/api/runs/{run.pk}/share-links/"


def test_an_editor_creates_a_link_that_opens_the_run_without_an_account(api, bob, run, client):
    api.force_authenticate(bob)
    resp = api.post(links_url(run), {"label": "for the reviewers"}, format="json")
    assert resp.status_code == 201
    link = resp.json()
    assert link["url"] == f"/share/{link['token']}/" and link["label"] == "for the reviewers"
    MetricPoint.objects.create(run=run, step=1, key="reward/mean", value=0.5, wall_time=1.0)
    anonymous = api.__class__()
    metrics = anonymous.get(f"/api/runs/{run.pk}/metrics/?share={link['token']}")
    assert metrics.status_code == 200 and metrics.json()["series"]["reward/mean"]["y"] == [0.5]
    assert anonymous.get(f"/api/runs/{run.pk}/notes/?share={link['token']}").status_code == 200


def test_a_link_opens_only_its_own_run(api, alice, team, run):
    other = Run.objects.create(team=team, name="other", spec={})
    link = ShareLink.objects.create(run=run, created_by=alice)
    assert api.get(f"/api/runs/{other.pk}/metrics/?share={link.token}").status_code == 404


def test_a_link_holder_cannot_write_notes(api, alice, run):
    link = ShareLink.objects.create(run=run, created_by=alice)
    resp = api.post(f"/api/runs/{run.pk}/notes/?share={link.token}", {"text": "hi"}, format="json")
    assert resp.status_code in (401, 403, 404)


def test_a_viewer_cannot_create_or_list_links(api, carol, run):
    api.force_authenticate(carol)
    assert api.post(links_url(run), {}, format="json").status_code == 403
    assert api.get(links_url(run)).status_code == 403
    assert not ShareLink.objects.exists()


def test_an_outsider_gets_404_for_links(api, charlie, alice, run):
    link = ShareLink.objects.create(run=run, created_by=alice)
    api.force_authenticate(charlie)
    assert api.get(links_url(run)).status_code == 404
    assert api.post(f"/api/share-links/{link.pk}/revoke/").status_code == 404
    link.refresh_from_db()
    assert not link.revoked


def test_a_revoked_link_stops_working_at_once(api, alice, run):
    link = ShareLink.objects.create(run=run, created_by=alice)
    anonymous = api.__class__()
    assert anonymous.get(f"/api/runs/{run.pk}/metrics/?share={link.token}").status_code == 200
    api.force_authenticate(alice)
    resp = api.post(f"/api/share-links/{link.pk}/revoke/")
    assert resp.status_code == 200 and resp.json()["revoked"] and resp.json()["token"] is None
    assert anonymous.get(f"/api/runs/{run.pk}/metrics/?share={link.token}").status_code == 404
    assert anonymous.get(f"/api/runs/{run.pk}/notes/?share={link.token}").status_code == 404
    assert anonymous.get(f"/share/{link.token}/").status_code == 404


def test_a_revoked_links_record_no_longer_carries_its_token_anywhere(api, alice, run):
    link = ShareLink.objects.create(run=run, created_by=alice)
    api.force_authenticate(alice)
    revoked = api.post(f"/api/share-links/{link.pk}/revoke/").json()
    assert (revoked["url"], revoked["token"]) == (None, None)
    listed = api.get(links_url(run)).json()["results"]
    assert [(r["id"], r["url"], r["token"]) for r in listed] == [(link.pk, None, None)]
    assert link.token not in api.get(links_url(run)).content.decode()


def _socket(run, token=None, user=None):
    path = f"/ws/runs/{run.pk}/" + (f"?share={token}" if token else "")
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user or AnonymousUser()
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_revoking_a_link_closes_the_websockets_opened_with_it(alice):
    from studio.accounts.models import Team

    team = await database_sync_to_async(Team.objects.get)(name=people.TEAM)
    run = await database_sync_to_async(Run.objects.create)(team=team, name="live", spec={})
    link = await database_sync_to_async(ShareLink.objects.create)(run=run, created_by=alice)
    guest, member = _socket(run, link.token), _socket(run, user=alice)
    for socket in (guest, member):
        assert (await socket.connect())[0]
        assert (await socket.receive_json_from())["kind"] == "hello"

    await database_sync_to_async(link.revoke)()

    assert await guest.receive_output(timeout=3) == {"type": "websocket.close", "code": 4403}
    assert await member.receive_nothing(timeout=0.3)  # the member's socket stays open
    again = _socket(run, link.token)
    await again.connect()
    assert await again.receive_output(timeout=3) == {"type": "websocket.close", "code": 4403}
    await member.disconnect()
