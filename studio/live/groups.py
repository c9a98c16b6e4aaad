"""Channel-layer groups beyond a run's own (`studio.runs.events.group_name`), and the
messages the rest of the studio sends them.

Every socket of a signed-in user also joins `user-<id>`: when a membership of that user
ends, its sockets re-check their access and close where it is gone, so removing someone
from a team cuts their open run pages off at once, as revoking a share link does.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models.signals import post_delete

log = logging.getLogger(__name__)


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


def recheck_access_of(user_id: int) -> None:
    """Ask every open socket of the user to check its access again (after commit)."""
    transaction.on_commit(lambda: _send(user_group(user_id), {"type": "run.access_check"}))


def _send(group: str, message: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # noqa: BLE001 - the change is committed; the next reconnect checks again
        log.exception("could not send %s to %s", message["type"], group)


def membership_ended(sender, instance, **kwargs) -> None:
    recheck_access_of(instance.user_id)


def connect_signals() -> None:
    from studio.accounts.models import Membership

    post_delete.connect(membership_ended, sender=Membership, dispatch_uid="live-membership-ended")
