"""The live stream of one run: `/ws/runs/<id>/?after=<seq>`.

On connect the consumer joins the run's group (and its user's group) *before* reading
the database: first the access check, so a share link revoked (or a membership ended)
after the check still reaches this socket and closes it; then `hello`, every stored
event after the client's cursor, and live events. Live events at or below the cursor
were already replayed and are dropped; a live event that skips ahead (two writers
published out of order) triggers a database read of the gap, so the client sees every
seq exactly once and in order.

Messages without a seq are hints, not stored events: `notes` (a note was added or
deleted: re-read them).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from studio.runs.access import viewable_run
from studio.runs.events import group_name
from studio.runs.live.groups import user_group
from studio.runs.models import RunEvent

REPLAY_BATCH = 500
CLOSE_DENIED = 4403


@database_sync_to_async
def _events_after(run_id: int, after: int, upto: int | None = None, limit: int = REPLAY_BATCH) -> list[dict[str, Any]]:
    events = RunEvent.objects.filter(run_id=run_id, seq__gt=after)
    if upto is not None:
        events = events.filter(seq__lte=upto)
    return [e.to_message() for e in events.order_by("seq")[:limit]]


class RunConsumer(AsyncJsonWebsocketConsumer):
    run_id: int
    cursor: int = 0
    share_token: str | None = None
    joined: tuple[str, ...] = ()

    async def connect(self) -> None:
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.share_token = (query.get("share") or [None])[0]
        self.run_id = self.scope["url_route"]["kwargs"]["run_id"]
        user = self.scope.get("user")
        # Join, then check. Checked first, a revoke committed between the check and the join
        # would be sent to a group this socket is not in yet, and the socket would stay open.
        # What arrives meanwhile waits in the channel until connect returns.
        await self._join(group_name(self.run_id), *([user_group(user.pk)] if user and user.is_authenticated else []))
        run = await self._viewable()
        await self.accept()
        if run is None:
            await self._deny()
            return
        self.cursor = _parse_cursor(query)
        await self.send_json({"kind": "hello", "run": run.summary(), "cursor": run.last_seq})
        await self._replay()

    async def disconnect(self, code: int) -> None:
        await self._leave()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("kind") == "ping":
            await self.send_json({"kind": "pong", "cursor": self.cursor})

    async def run_events(self, message: dict[str, Any]) -> None:
        """Events of one flush, in seq order."""
        for event in message["events"]:
            if event["seq"] <= self.cursor:
                continue
            if event["seq"] > self.cursor + 1:
                await self._replay(upto=event["seq"] - 1)
            await self._send_event(event)

    async def run_access_revoked(self, message: dict[str, Any]) -> None:
        """A share link was revoked: close the sockets that came in through it."""
        if self.share_token and message.get("share_token") == self.share_token:
            await self._deny()

    async def run_access_check(self, message: dict[str, Any]) -> None:
        """The user lost a membership (sent to the user's group): close if this run is now out of reach."""
        if await self._viewable() is None:
            await self._deny()

    async def run_notes_changed(self, message: dict[str, Any]) -> None:
        """A note on the run was added or deleted; the page re-reads the notes it may see."""
        await self.send_json({"kind": "notes", "data": {"note": message.get("note")}})

    async def _viewable(self):
        """The run if this socket's user or share link may see it, else None (two or three queries)."""
        return await database_sync_to_async(viewable_run)(self.scope.get("user"), self.run_id, self.share_token)

    async def _deny(self) -> None:
        await self._leave()
        await self.close(code=CLOSE_DENIED)

    async def _join(self, *groups: str) -> None:
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        self.joined += groups

    async def _leave(self) -> None:
        groups, self.joined = self.joined, ()
        for group in groups:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def _replay(self, upto: int | None = None) -> None:
        while True:
            batch = await _events_after(self.run_id, self.cursor, upto)
            for event in batch:
                await self._send_event(event)
            if len(batch) < REPLAY_BATCH:
                return

    async def _send_event(self, event: dict[str, Any]) -> None:
        self.cursor = event["seq"]
        await self.send_json(event)


def _parse_cursor(query: dict[str, list[str]]) -> int:
    try:
        return max(0, int((query.get("after") or ["0"])[0]))
    except ValueError:
        return 0
