"""A note added or deleted reaches the run's open pages at once: members' and share-link
guests' sockets get a `notes` hint (no seq: it is not a stored event) and re-read the notes."""

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from rest_framework.test import APIClient

from studio.runs.live.routing import websocket_urlpatterns
from studio.runs.models import Run
from studio.sharing.models import ShareLink

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


async def open_socket(run, token=None, user=None) -> WebsocketCommunicator:
    path = f"/ws/runs/{run.pk}/" + (f"?share={token}" if token else "")
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    socket.scope["user"] = user or AnonymousUser()
    assert (await socket.connect())[0]
    assert (await socket.receive_json_from(timeout=3))["kind"] == "hello"
    return socket


async def test_adding_and_deleting_a_note_tells_members_and_guests_at_once(team, alice, carol):
    run = await database_sync_to_async(Run.objects.create)(team=team, name="r", spec={})
    link = await database_sync_to_async(ShareLink.objects.create)(run=run, created_by=alice)
    member, guest = await open_socket(run, user=carol), await open_socket(run, link.token)
    api = APIClient()
    api.force_authenticate(alice)

    post = database_sync_to_async(api.post)
    note = (await post(f"/api/runs/{run.pk}/notes/", {"text": "KL climbs", "tag": "question"}, format="json")).json()
    for socket in (member, guest):
        assert await socket.receive_json_from(timeout=3) == {"kind": "notes", "data": {"note": note["id"]}}

    assert (await database_sync_to_async(api.delete)(f"/api/notes/{note['id']}/")).status_code == 204
    for socket in (member, guest):
        assert await socket.receive_json_from(timeout=3) == {"kind": "notes", "data": {"note": note["id"]}}
        await socket.disconnect()
