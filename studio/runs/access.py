"""The one answer to "may this user see this run?", for views, the API and the websocket.

Besides team members, a live read-only share link (`share_token`) lets anyone read the run; what a
share link's reader is sent goes through studio.sharing.share_view (no host names, no server paths).
"""

from __future__ import annotations

from rest_framework.exceptions import NotAuthenticated, NotFound

from studio.accounts.permissions import role_in
from studio.runs.models import Run
from studio.sharing.models import share_token_opens
from studio.sharing.share_view import ShareView, known_hosts


def viewable_run(user, run_id, share_token: str | None = None) -> Run | None:
    """The run if the user is a member of its team (any role) or holds a live share link
    to it (`share_token`, read-only), else None. Two or three queries."""
    run, _ = run_access(user, run_id, share_token)
    return run


def run_access(user, run_id, share_token: str | None = None) -> tuple[Run | None, bool]:
    """(viewable_run's answer, whether it is seen through the share link): a member is a member,
    whatever token they hold, and sees everything; a share link's reader is sent share views."""
    try:
        run = Run.objects.get(pk=int(run_id))
    except (Run.DoesNotExist, ValueError, TypeError):
        return None, False
    if role_in(user, run.team_id) is not None:
        return run, False
    if share_token and share_token_opens(run.pk, share_token):
        return run, True
    return None, False


def readable_run(request, run_id) -> Run:
    """viewable_run for an API read: the request's user, or its `?share=` token.

    Raises NotAuthenticated (401/403) for an anonymous request without a token, as every other
    API read does, and NotFound for everyone who may not see the run (no leak that it exists).
    A request the share link opens is marked (`request.share_view`) for the view's ShareViewMixin.
    """
    token = request.query_params.get("share")
    if not token and not request.user.is_authenticated:
        raise NotAuthenticated()
    run, shared = run_access(request.user, run_id, share_token=token)
    if run is None:
        raise NotFound("not found")
    if shared:  # the view's answer goes out as a share view (ShareViewMixin)
        request.share_view = ShareView(known_hosts(run))
    return run
