"""Team API tokens for /v1/: made (the key shown once), found from a request's bearer key, revoked.

The key is random and only its digest is stored (studio.lib.keys), so a copy of the database does not
open the endpoint.
"""

from __future__ import annotations

from django.utils import timezone

from studio.lib import keys
from studio.serving.models import SCOPES, ApiToken

KEY_PREFIX = "rs-"
MAX_KEY_CHARS = 200  # a longer Authorization header is refused before it is hashed


def scope_errors(scopes: object) -> str | None:
    """Why `scopes` is not a non-empty list of known scopes; None when it is."""
    if not isinstance(scopes, list) or not scopes:
        return f"choose one or more of {', '.join(sorted(SCOPES))}"
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        return f"unknown scope {unknown[0]!r}: choose from {', '.join(sorted(SCOPES))}"
    return None


def create(team, name: str, scopes: list[str], user=None) -> tuple[ApiToken, str]:
    """(the token row, its key): the key is not stored and cannot be shown again."""
    key = keys.new_key(KEY_PREFIX)
    token = ApiToken.objects.create(
        team=team, name=name, scopes=sorted(set(scopes)), prefix=key[:10], key_hash=keys.digest(key), created_by=user
    )
    return token, key


def authenticate(authorization: str | None) -> ApiToken | None:
    """The live token a `Bearer <key>` header names, its last use stamped; None otherwise."""
    if not authorization or len(authorization) > MAX_KEY_CHARS + 10:
        return None
    kind, _, key = authorization.partition(" ")
    if kind.lower() != "bearer" or not key.startswith(KEY_PREFIX):
        return None
    token = ApiToken.objects.select_related("team").filter(key_hash=keys.digest(key.strip()), revoked=None).first()
    if token is not None:
        ApiToken.objects.filter(pk=token.pk).update(last_used=timezone.now())
    return token


def revoke(token: ApiToken) -> None:
    if token.revoked is None:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])
