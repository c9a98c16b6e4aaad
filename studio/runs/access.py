"""The one answer to "may this user see this run?", for views, the API and the websocket.

The run-page engineer extends it with read-only share links (`share_token`).
"""

from __future__ import annotations

from studio.accounts.permissions import role_in
from studio.runs.models import Run


def viewable_run(user, run_id, share_token: str | None = None) -> Run | None:
    """The run if the user is a member of its team (any role) or holds a live share link
    to it (`share_token`, read-only), else None. Two or three queries."""
    try:
        run = Run.objects.get(pk=int(run_id))
    except (Run.DoesNotExist, ValueError, TypeError):
        return None
    if role_in(user, run.team_id) is not None:
        return run
    if share_token:
        from studio.sharing.models import share_token_opens  # sharing builds on runs, not the reverse

        if share_token_opens(run.pk, share_token):
            return run
    return None
