"""Append to a run's event stream, then publish: the one way events enter the system.

Both the worker's Reporter and the studio (cancel, sweeper) call `record`, so `seq`
is allocated in one place: the UPDATE on the run row takes its lock (a row lock on
PostgreSQL, the write lock on SQLite) until the transaction commits, so two writers
never get the same numbers. Publishing happens after commit, so a client that sees a
live event can always find it (and everything before it) in the database.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F

from studio.runs.models import Run, RunEvent

log = logging.getLogger(__name__)

EventItem = tuple[str, int | None, dict[str, Any]]  # (kind, step, data)


def group_name(run_id: int) -> str:
    return f"run-{run_id}"


def append(run_id: int, items: list[EventItem], **run_fields: Any) -> list[dict[str, Any]]:
    """Persist events (and optional Run field updates) atomically; returns the wire messages."""
    if not items:
        if run_fields:
            Run.objects.filter(pk=run_id).update(**run_fields)
        return []
    with transaction.atomic():
        Run.objects.filter(pk=run_id).update(last_seq=F("last_seq") + len(items), **run_fields)
        last = Run.objects.filter(pk=run_id).values_list("last_seq", flat=True).get()
        now = time.time()
        first = last - len(items) + 1
        events = [
            RunEvent(run_id=run_id, seq=first + i, kind=kind, step=step, payload=data, created=now)
            for i, (kind, step, data) in enumerate(items)
        ]
        RunEvent.objects.bulk_create(events)
    return [event.to_message() for event in events]


def send_to_group(group: str, message: dict[str, Any]) -> None:
    """Send one channel-layer message to a group (nothing without a channel layer)."""
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(group, message)


def announce(group: str, message: dict[str, Any]) -> None:
    """`send_to_group`, best effort: what it announces is already committed and clients catch up
    from the database when they reconnect, so a broker hiccup is logged, not raised."""
    try:
        send_to_group(group, message)
    except Exception as exc:  # noqa: BLE001 - live delivery is best effort
        # A line, not a traceback: while Redis is away every flush of every run comes here.
        log.warning("could not send %s to %s: %s: %s", message.get("type"), group, type(exc).__name__, exc)


def publish(run_id: int, messages: list[dict[str, Any]]) -> None:
    """Send a flush's events to the run's group as one channel message (`run.events`): one
    Redis round trip per flush, not one per event. A broker hiccup loses nothing: clients
    resume from the database."""
    if messages:
        announce(group_name(run_id), {"type": "run.events", "events": messages})


def record(run_id: int, items: list[EventItem], **run_fields: Any) -> list[dict[str, Any]]:
    """Append, then publish once the surrounding transaction (if any) has committed."""
    messages = append(run_id, items, **run_fields)
    transaction.on_commit(lambda: publish(run_id, messages))
    return messages


def status_item(state: str, detail: str = "", **more: Any) -> EventItem:
    """A status event; `more`: what else the run page updates with it (e.g. `placement` on start)."""
    return ("status", None, {"state": state, "detail": detail, **more})
