"""An open run socket closes (4403) when its access ends: a share link revoked, even in the
instant between the socket's access check and its joining the run's group, or a member
removed from the run's team. Sockets that keep their access stay open."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from studio.accounts.models import EDITOR, OWNER, VIEWER, Membership, Team
from studio.runs.live import consumers
from studio.runs.live.routing import websocket_urlpatterns
from studio.runs.models import Run
from studio.sharing.models import ShareLink

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
CLOSED = {"type": "websocket.close", "code": 4403}


@database_sync_to_async
def setup_run():
    """alice owns the run's team, carol views in it and bob edits in it; a share link to the run."""
    users = get_user_model().objects
    alice, carol, bob = (users.create_user(n, password="pw") for n in ("alice", "carol", "bob"))
    team = Team.objects.create(name="t")
    team.add_member(alice, OWNER)
    team.add_member(carol, VIEWER)
    team.add_member(bob, EDITOR)
    run = Run.objects.create(team=team, name="r", spec={}, state="running")
    link = ShareLink.objects.create(run=run, created_by=alice)
    return run, link, {"alice": alice, "carol": carol, "bob": bob}


async def open_socket(run, token=None, user=None) -> WebsocketCommunicator:
    path = f"/ws/runs/{run.pk}/" + (f"?share={token}" if token else "")
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    socket.scope["user"] = user or AnonymousUser()
    assert (await socket.connect())[0]
    return socket


async def test_a_link_revoked_right_after_the_access_check_still_closes_the_socket(monkeypatch):
    run, link, _ = await setup_run()
    checked = consumers.run_access  # the connect's access check (which also says whether it is a share link's)

    def check_then_revoke(user, run_id, share_token=None):
        found = checked(user, run_id, share_token)
        link.revoke()  # committed (and announced) before the consumer goes on
        return found

    monkeypatch.setattr(consumers, "run_access", check_then_revoke)
    guest = await open_socket(run, link.token)
    assert (await guest.receive_json_from(timeout=3))["kind"] == "hello"
    assert await guest.receive_output(timeout=3) == CLOSED


async def test_removing_a_member_from_the_team_closes_their_sockets_and_no_one_elses():
    run, link, users = await setup_run()
    carol, bob, guest = (
        await open_socket(run, user=users["carol"]),
        await open_socket(run, user=users["bob"]),
        await open_socket(run, link.token),
    )
    for socket in (carol, bob, guest):
        assert (await socket.receive_json_from(timeout=3))["kind"] == "hello"

    await database_sync_to_async(Membership.objects.filter(user=users["carol"]).delete)()

    assert await carol.receive_output(timeout=3) == CLOSED
    assert await bob.receive_nothing(timeout=0.3)
    assert await guest.receive_nothing(timeout=0.1)
    await bob.disconnect()
    await guest.disconnect()


async def test_a_removed_member_holding_a_live_share_link_keeps_the_shared_page():
    run, link, users = await setup_run()
    socket = await open_socket(run, link.token, user=users["carol"])
    assert (await socket.receive_json_from(timeout=3))["kind"] == "hello"
    await database_sync_to_async(Membership.objects.filter(user=users["carol"]).delete)()
    assert await socket.receive_nothing(timeout=0.3)
    await socket.disconnect()
