"""A password change ends the user's sessions and revokes their API token.

Sessions end by themselves: Django checks each session against a hash of the password it was made
with. An API token knows nothing of the password, so it is deleted when the password changes (the
user gets a new one from the teams page or POST /api/token/).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save
from rest_framework.authtoken.models import Token


def revoke_tokens_on_password_change(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    """post_save of the user model: a new password (set_password, then save) deletes the user's API token.

    `_password` is set by set_password and cleared after the save; Django's re-hashing of an unchanged
    password at sign-in (a newer hasher) clears it before saving, so that keeps the token."""
    if not created and getattr(instance, "_password", None) is not None:
        Token.objects.filter(user=instance).delete()


def connect() -> None:
    post_save.connect(revoke_tokens_on_password_change, sender=settings.AUTH_USER_MODEL,
                      dispatch_uid="revoke-tokens-on-password-change")  # fmt: skip
