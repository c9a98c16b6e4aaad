"""The studio's own static file server (ASGI), with the header Django's SecurityMiddleware sends on
every other answer: static files are answered before any middleware runs."""

from __future__ import annotations

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.http import HttpRequest, HttpResponseBase


class StaticFilesHandler(ASGIStaticFilesHandler):
    """ASGIStaticFilesHandler whose answers (a missing file's 404 too) carry X-Content-Type-Options:
    nosniff, so a browser never runs a file as another type than the one it is served as."""

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response = await super().get_response_async(request)
        if settings.SECURE_CONTENT_TYPE_NOSNIFF:
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response
