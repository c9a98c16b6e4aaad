"""Websocket authentication: the browser's session cookie, or an API token for scripts
(`Authorization: Token <key>` header or `?token=<key>`)."""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator
from django.conf import settings


@database_sync_to_async
def _user_for_token(key: str):
    from rest_framework.authtoken.models import Token

    token = Token.objects.select_related("user").filter(key=key).first()
    return token.user if token and token.user.is_active else None


def _token_from(scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization" and value.startswith(b"Token "):
            return value[6:].decode().strip()
    query = parse_qs(scope.get("query_string", b"").decode())
    return (query.get("token") or [None])[0]


class TokenAuthMiddleware(BaseMiddleware):
    """Runs after the session middleware; a valid token replaces an anonymous user."""

    async def __call__(self, scope, receive, send):
        key = _token_from(scope)
        user = scope.get("user")
        if key and (user is None or not user.is_authenticated):
            token_user = await _user_for_token(key)
            if token_user is not None:
                scope = dict(scope, user=token_user)
        return await super().__call__(scope, receive, send)


def SessionOrTokenAuthMiddleware(inner):  # noqa: N802 (a middleware stack, named like one)
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))


class BrowserOriginValidator(OriginValidator):
    """Browsers always send Origin on a websocket handshake, so a foreign page is refused;
    a request without Origin comes from a script or notebook, which must still authenticate."""

    def valid_origin(self, parsed_origin) -> bool:
        return parsed_origin is None or self.validate_origin(parsed_origin)


def AllowedHostsBrowserOriginValidator(inner):  # noqa: N802 (wraps an app, named like Channels' own)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = ["localhost", "127.0.0.1", "[::1]"]
    return BrowserOriginValidator(inner, allowed)
