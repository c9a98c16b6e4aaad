"""A share link's reader is sent no host names and no server paths (studio.sharing.share_view): the
share page, the prompts page, every API read a share token opens and the websocket (its hello, the
replay of everything after a cursor, live events). Members are sent everything, as before.

The run carries what a worker writes: its worker's name (local@<this machine>), a fleet worker on
another machine, checkpoint folders under the data folder, log lines, a status detail, a warning, a
queue text naming the workers, a rollout whose criterion failed on a file, a tool error, a note."""

from __future__ import annotations

import re
import socket

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from rest_framework.test import APIClient

from studio.fleet.models import WorkerNode
from studio.runs import events
from studio.runs.live.routing import websocket_urlpatterns
from studio.runs.models import Checkpoint, Run, RunRestart
from studio.sharing.models import Note, ShareLink
from studio.sharing.share_view import ShareView, share_view
from studio.tracking.models import MirrorStatus
from tests.studio import people
from tests.studio.records import make_rollout

HOST = socket.gethostname()
WORKER = f"local@{HOST}"
OTHER = "gpu@node-7.cluster.example"  # a fleet worker on another machine


def leaks(text: str) -> list[str]:
    """What a share view must not carry, found in `text`: this machine's name (as a name, not inside a
    word), the workers' names and the other machine's, the data folder."""
    found = [w for w in (WORKER, OTHER, "node-7.cluster.example", str(settings.DATA_DIR)) if w in text]
    if re.search(rf"(?<![\w.-]){re.escape(HOST)}(?![\w-])", text, re.IGNORECASE):
        found.append(HOST)
    return found


def internals(run: Run) -> dict[str, str]:
    data = settings.DATA_DIR
    return {
        "checkpoint": f"{data}/runs/{run.pk}/checkpoints/step_000003",
        "log": f"[{WORKER}] loading the model from {data}/models/tiny on {HOST}",
        "status": f"started on {WORKER}",
        "warning": f"criterion 'correct' failed on 9 of 10 rollouts: cannot read {data}/uploads/7/rows.jsonl",
        "error": f"lost its worker {WORKER} (heartbeat); resumed from file://{data}/runs/{run.pk}/checkpoints",
    }


@pytest.fixture
def shared(team, alice):
    return make_shared(team, alice)


def make_shared(team, alice):
    """A run full of internals, its share link, what was written (by name) and its rollout."""
    WorkerNode.record_start(OTHER, ["gpu"], [], 1)
    WorkerNode.record_start(WORKER, ["celery"], [], 1)
    run = Run.objects.create(team=team, name="grpo-tiny", spec={}, created_by=alice, total_steps=10, state="failed",
                             worker=WORKER, placement=f"1 process on {HOST}")  # fmt: skip
    said = internals(run)
    Run.objects.filter(pk=run.pk).update(error=said["error"], warning=said["warning"])
    events.record(run.pk, [("status", None, {"state": "running", "detail": said["status"]}),
                           ("log", None, {"line": said["log"]}),
                           ("checkpoint", 3, {"step": 3, "path": said["checkpoint"]}),
                           ("warning", 3, {"message": said["warning"]})])  # fmt: skip
    Checkpoint.objects.create(run=run, step=3, path=said["checkpoint"])
    RunRestart.objects.create(run=run, number=1, reason=f"worker {WORKER} stopped answering", from_step=3,
                              checkpoint=said["checkpoint"])  # fmt: skip
    MirrorStatus.objects.create(run=run, tracker="trackio", state="done", location=f"{settings.DATA_DIR}/trackio.db")
    rollout = make_rollout(run, step=3, completion=f"I looked in {settings.DATA_DIR}/secrets and on {HOST}")
    rollout.scores = {"correct": {"score": 0.0, "explanation": "", "error": f"FileNotFoundError: {said['checkpoint']}"}}
    rollout.save()
    Note.objects.create(run=run, author=alice, text=f"see {WORKER}:{said['checkpoint']}")
    run.refresh_from_db()
    return run, ShareLink.objects.create(run=run, created_by=alice), said, rollout


def reads(run: Run, rollout) -> list[str]:
    """Every API read a share token opens, for this run."""
    base = f"/api/runs/{run.pk}"
    return [f"{base}/metrics/", f"{base}/notes/", f"{base}/rollouts/", f"{base}/rollouts/{rollout.pk}/",
            f"{base}/rollouts/{rollout.pk}/text/?field=completion", f"{base}/prompts/"]  # fmt: skip


def test_the_share_pages_carry_no_host_names_or_server_paths_and_members_pages_do(shared, client, alice):
    run, link, said, _ = shared
    page = client.get(f"/share/{link.token}/")
    assert page.status_code == 200
    body = page.content.decode()
    assert leaks(body) == [], leaks(body)
    assert "grpo-tiny" in body and "[host]" in body  # the page is all there, its machines taken out
    assert "resumed from [path]/checkpoints" in body  # the error still says what, not where
    prompts = client.get(f"/share/{link.token}/prompts/").content.decode()
    assert leaks(prompts) == []

    client.force_login(alice)  # a member sees where it ran
    member = client.get(f"/runs/{run.pk}/").content.decode()
    assert WORKER in member and str(settings.DATA_DIR) in member


def test_every_api_read_of_a_share_link_carries_none_and_members_get_everything(shared, alice):
    run, link, said, rollout = shared
    guest, member = APIClient(), APIClient()
    member.force_authenticate(alice)
    for url in reads(run, rollout):
        sep = "&" if "?" in url else "?"
        answer = guest.get(f"{url}{sep}share={link.token}")
        assert answer.status_code == 200, (url, answer.content)
        assert leaks(answer.content.decode()) == [], (url, leaks(answer.content.decode()))
    detail = guest.get(f"{reads(run, rollout)[3]}?share={link.token}").json()
    assert detail["scores"]["correct"]["error"] == "FileNotFoundError: [path]/step_000003"
    assert guest.get(f"/api/runs/{run.pk}/notes/?share={link.token}").json()["results"][0]["text"] == (
        "see [host]:[path]/step_000003"  # the worker's whole name, as the fleet knows it
    )
    full = member.get(reads(run, rollout)[3]).json()
    assert full["scores"]["correct"]["error"] == f"FileNotFoundError: {said['checkpoint']}"
    # A member holding the link as well is a member: everything.
    held = member.get(f"{reads(run, rollout)[1]}?share={link.token}").content.decode()
    assert WORKER in held and str(settings.DATA_DIR) in held


def _socket(run, token=None, user=None, after=0):
    path = f"/ws/runs/{run.pk}/?after={after}" + (f"&share={token}" if token else "")
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user or AnonymousUser()
    return communicator


async def _messages(socket, count: int) -> list[dict]:
    return [await socket.receive_json_from(timeout=5) for _ in range(count)]


@pytest.mark.django_db(transaction=True)
async def test_the_live_stream_of_a_share_link_carries_none_replayed_or_live():
    team = await database_sync_to_async(people.the_team)()
    alice = await database_sync_to_async(people.person)("alice")
    run, link, said, _ = await database_sync_to_async(make_shared)(team, alice)
    guest, member = _socket(run, link.token), _socket(run, user=alice)
    for socket_ in (guest, member):
        assert (await socket_.connect())[0]
    replayed = await _messages(guest, 5)  # hello, then the four events after cursor 0
    seen = await _messages(member, 5)
    assert [m["kind"] for m in replayed] == ["hello", "status", "log", "checkpoint", "warning"]
    assert leaks(str(replayed)) == [], leaks(str(replayed))
    assert replayed[3]["data"]["path"] == "[path]/step_000003" and replayed[3]["step"] == 3
    assert replayed[0]["run"]["error"].startswith("lost its worker [host] (heartbeat)")
    assert seen[3]["data"]["path"] == said["checkpoint"] and WORKER in seen[0]["run"]["error"]

    later = f"{settings.DATA_DIR}/runs/{run.pk}/checkpoints/step_000004"
    await database_sync_to_async(events.record)(run.pk, [("checkpoint", 4, {"step": 4, "path": later}),
                                                         ("log", None, {"line": f"saved on {HOST}"})])  # fmt: skip
    live = await _messages(guest, 2)
    assert leaks(str(live)) == [] and live[0]["data"]["path"] == "[path]/step_000004"
    assert live[1]["data"]["line"] == "saved on [host]"
    assert (await _messages(member, 1))[0]["data"]["path"] == later
    # A reconnect from a cursor replays from there, through the same share view.
    again = _socket(run, link.token, after=4)
    assert (await again.connect())[0]
    replay = await _messages(again, 3)
    assert [m["kind"] for m in replay] == ["hello", "checkpoint", "log"] and leaks(str(replay)) == []
    for socket_ in (guest, member, again):
        await socket_.disconnect()


def test_the_share_view_keeps_what_is_not_a_machine(db):
    view = ShareView({"vm", "gpu@node-7"})
    kept = ["reward/mean", "http://localhost:8000/v1", "localhost:8000/v1", "1/2 of the groups", "a-vm-b", "vm_x",
            "see /share/abc/"]  # fmt: skip
    assert [view(t) for t in kept] == kept
    assert view("on vm at /home/ada/runs/x/ckpt and gpu@node-7") == "on [host] at [path]/ckpt and [host]"
    assert view({"/tmp/x": [1, 2.5, None, True]}) == {"[path]/x": [1, 2.5, None, True]}
    assert view("file:///var/lib/studio") == "[path]/studio"
    assert view("scp vm:/srv/data/rows.jsonl") == "scp [host]:[path]/rows.jsonl"
    assert share_view("nothing here") == "nothing here"
