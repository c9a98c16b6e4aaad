"""What a locked-out sign-in is answered (django-axes counts the failures; settings.AXES_*).

The sign-in page shows itself again with the reason (429); POST /api/token/ answers
`{"detail": ..., "locked": true}` (429). Both say how long the cool-off is and how an admin lifts it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

LOCKED = 429  # Too Many Requests: the same code as a throttled API call


def lockout_message() -> str:
    minutes = settings.AXES_COOLOFF_TIME.total_seconds() / 60
    return (
        f"Too many failed sign-ins ({settings.AXES_FAILURE_LIMIT}) for this username from this address: "
        f"sign-in is locked for {minutes:g} minutes from the last try. Wait, or ask an admin to lift it "
        "(./manage.py axes_reset_username <username>)."
    )


def lockout_response(request: HttpRequest, *args: Any) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE. django-axes passes (request, response, credentials) or, on its asynchronous
    path, (request, credentials): neither is needed here, so the rest are ignored."""
    if request.path.startswith("/api/"):
        return api_lockout_response()
    context = {"form": AuthenticationForm(request), "lockout": lockout_message(), "next": request.POST.get("next", "")}
    return render(request, "registration/login.html", context, status=LOCKED)


def api_lockout_response() -> HttpResponse:
    return JsonResponse({"detail": lockout_message(), "locked": True}, status=LOCKED)


def client_address(request: HttpRequest) -> str | None:
    """AXES_CLIENT_IP_CALLABLE: where a sign-in comes from. Behind the studio's reverse proxy
    (STUDIO_BEHIND_PROXY) every request comes from the proxy, so it is the address the proxy appended
    last to X-Forwarded-For (the entries before it are the client's to write); otherwise REMOTE_ADDR,
    and a client's own X-Forwarded-For cannot move it to a fresh count."""
    if settings.BEHIND_PROXY:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        if forwarded[-1]:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR")
