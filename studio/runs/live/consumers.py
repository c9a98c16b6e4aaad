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

A socket opened with a share link (by someone not in the run's team) is sent share views only: every
message goes through studio.sharing.share_view on its way out (`send_json`), replayed or live, so a
checkpoint's folder or a log line's worker name never reaches it.

The channel layer (Redis) may go away while the socket is open, and come back empty (an embedded
Redis keeps nothing across a restart), its group memberships gone. A layer that fails (connection
refused, reset, timed out) closes the socket with CLOSE_LAYER_LOST, so the page reconnects from its
cursor and reads what it missed from the database once Redis answers. Memberships lost without a failure this
socket sees (Redis restarted between two of its reads, a failover, channels_redis' group expiry on a
page open for a day) would leave it open and deaf: every LIVE_REJOIN_S it joins its groups again and
reads what it missed, between its other messages, so nothing is missed or sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from studio.lib import json_limits
from studio.runs.access import run_access, viewable_run
from studio.runs.events import group_name
from studio.runs.live.groups import user_group
from studio.runs.models import RunEvent
from studio.sharing.share_view import ShareView, known_hosts

log = logging.getLogger(__name__)

REPLAY_BATCH = 500
CLOSE_DENIED = 4403
# The live stream's broker is away: the page reconnects (ws.js retries every code but 4403/4404).
# Not 1011: autobahn lets a server send only 1000 or 3000-4999.
CLOSE_LAYER_LOST = 4503
# What a channel layer that cannot reach its Redis raises (channels_redis, through redis-py).
LAYER_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)


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
    share_view: ShareView | None = None  # set for a share link's reader: what it is sent goes through it
    joined: tuple[str, ...] = ()
    rejoining: asyncio.Task | None = None

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except LAYER_ERRORS as exc:
            # Without this, channels ends the consumer just the same and daphne drops the socket
            # (1011), after a traceback per open socket; one line says it, and the close is ours.
            log.warning("run %s: live socket closed, the channel layer failed (%s: %s); the page reconnects",
                        getattr(self, "run_id", "?"), type(exc).__name__, exc)  # fmt: skip
            with contextlib.suppress(Exception):  # before accept this refuses the handshake: retried as well
                await send({"type": "websocket.close", "code": CLOSE_LAYER_LOST})
        finally:
            if self.rejoining is not None:
                self.rejoining.cancel()

    async def connect(self) -> None:
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.share_token = (query.get("share") or [None])[0]
        self.run_id = self.scope["url_route"]["kwargs"]["run_id"]
        user = self.scope.get("user")
        # Join, then check. Checked first, a revoke committed between the check and the join
        # would be sent to a group this socket is not in yet, and the socket would stay open.
        # What arrives meanwhile waits in the channel until connect returns.
        await self._join(group_name(self.run_id), *([user_group(user.pk)] if user and user.is_authenticated else []))
        run, shared = await database_sync_to_async(run_access)(user, self.run_id, self.share_token)
        if shared:
            self.share_view = ShareView(await database_sync_to_async(known_hosts)(run))
        await self.accept()
        if run is None:
            await self._deny()
            return
        self.cursor = _parse_cursor(query)
        summary = await database_sync_to_async(run.summary)()  # its actions read the run's checkpoints
        await self.send_json({"kind": "hello", "run": summary, "cursor": run.last_seq})
        await self._replay()
        self.rejoining = asyncio.create_task(self._ask_to_rejoin(settings.LIVE_REJOIN_S))

    async def disconnect(self, code: int) -> None:
        await self._leave()

    async def live_rejoin(self, message: dict[str, Any]) -> None:
        """Join this socket's groups again (a no-op while they hold it), then send what the run
        recorded after the cursor: what was published while a lost membership kept it away."""
        if not self.joined:  # denied, or leaving
            return
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self._replay()

    async def _ask_to_rejoin(self, every_s: float) -> None:
        """Every `every_s`, a `live.rejoin` message to this consumer's own channel: the rejoin runs
        between its other messages, never during one. A send that fails is not acted on here: the
        layer's failure reaches the consumer's receive too, which closes the socket."""
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.channel_layer.send(self.channel_name, {"type": "live.rejoin"})
            except LAYER_ERRORS:
                continue

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """A client's message, read within the JSON limits (studio.lib.json_limits): one that is not
        JSON, or past a limit, is answered with why and the socket stays open."""
        try:
            content = json_limits.loads(text_data or "")
        except ValueError as exc:
            await self.send_json({"kind": "error", "detail": f"not a message the studio reads: {exc}"})
            return
        await self.receive_json(content)

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

    async def send_json(self, content: Any, close: bool = False) -> None:
        """Every message this socket sends; a share link's reader gets its share view."""
        await super().send_json(self.share_view(content) if self.share_view is not None else content, close)

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
        if self.rejoining is not None:
            self.rejoining.cancel()
        groups, self.joined = self.joined, ()
        for group in groups:
            # Best effort: a layer that is away has lost the membership or expires it.
            with contextlib.suppress(*LAYER_ERRORS):
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
