"""Channel-layer groups beyond a run's own (`studio.runs.events.group_name`), and the
messages the rest of the studio sends them.

Every socket of a signed-in user also joins `user-<id>`: when a membership of that user
ends, its sockets re-check their access and close where it is gone, so removing someone
from a team cuts their open run pages off at once, as revoking a share link does.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_delete

from studio.runs.events import announce


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


def recheck_access_of(user_id: int) -> None:
    """Ask every open socket of the user to check its access again (after commit)."""
    transaction.on_commit(lambda: announce(user_group(user_id), {"type": "run.access_check"}))


def membership_ended(sender, instance, **kwargs) -> None:
    recheck_access_of(instance.user_id)


def connect_signals() -> None:
    from studio.accounts.models import Membership

    post_delete.connect(membership_ended, sender=Membership, dispatch_uid="live-membership-ended")
