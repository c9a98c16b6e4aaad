"""Notes on runs and rollouts, and read-only share links to one run.

Who may do what (the permission helpers in studio.accounts.permissions decide):
- every team member reads a run's notes; owners and editors write them (viewers read only,
  as everywhere else in the studio); a note's author or a team owner deletes it;
- owners and editors create and revoke share links;
- a share link lets anyone holding it read that one run (curves, rollouts, notes) until it
  is revoked; revoking closes the websockets opened with it at once.

Adding or deleting a note tells the run's open pages (a `notes` hint on the websocket) to
re-read the notes; the hint is not stored, so a page that reconnects re-reads them too.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from studio.runs.events import announce, group_name, send_to_group
from studio.runs.models import Rollout, Run

TAG_MAX = 40
TEXT_MAX = 4000
SUGGESTED_TAGS = ("reward hacking", "format broken", "good", "bug", "question")
QUICK_TAGS = SUGGESTED_TAGS[:3]  # one-click buttons on a rollout's note form: what reading rollouts turns up


def new_token() -> str:
    return secrets.token_urlsafe(24)


def notes_changed(run_id: int, note_id: int) -> None:
    """After commit, tell the run's open pages to re-read its notes (best effort: the note is saved)."""
    transaction.on_commit(lambda: announce(group_name(run_id), {"type": "run.notes_changed", "note": note_id}))


class Note(models.Model):
    """A teammate's note on a run, or on one rollout of it (`rollout` set)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="notes")
    rollout = models.ForeignKey(Rollout, null=True, blank=True, on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    tag = models.CharField(
        max_length=TAG_MAX, blank=True, help_text='A short label to filter by, e.g. "reward hacking".'
    )
    text = models.TextField(max_length=TEXT_MAX)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["run", "-created"]), models.Index(fields=["run", "tag"])]

    def as_dict(self, can_delete: bool = False) -> dict[str, Any]:
        """The API form. Reads self.rollout's step: select_related("rollout", "author") when listing."""
        return {
            "id": self.pk,
            "run": self.run_id,
            "rollout": self.rollout_id,
            "rollout_step": self.rollout.step if self.rollout_id else None,
            "author": self.author.get_username() if self.author else "(deleted user)",
            "tag": self.tag,
            "text": self.text,
            "created": self.created.isoformat(),
            "can_delete": can_delete,
        }


class ShareLinkQuerySet(models.QuerySet):
    def live(self) -> ShareLinkQuerySet:
        return self.filter(revoked_at__isnull=True)


class ShareLink(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="share_links")
    token = models.CharField(max_length=64, unique=True, default=new_token)
    label = models.CharField(max_length=100, blank=True, help_text="Who the link is for, to recognise it later.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ShareLinkQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def path(self) -> str:
        return f"/share/{self.token}/"

    def revoke(self) -> None:
        """Stop the link working: at once for new requests, and (after commit) for open websockets."""
        if self.revoked:
            return
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        transaction.on_commit(self._close_sockets)

    def _close_sockets(self) -> None:
        send_to_group(group_name(self.run_id), {"type": "run.access_revoked", "share_token": self.token})

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "run": self.run_id,
            "label": self.label,
            "url": None if self.revoked else self.path,  # the path holds the token: gone with it
            "token": None if self.revoked else self.token,
            "created_by": self.created_by.get_username() if self.created_by else "(deleted user)",
            "created": self.created.isoformat(),
            "revoked": self.revoked,
        }


def share_token_opens(run_id: int, token: str) -> bool:
    """Whether `token` is a live share link to this run (one indexed query)."""
    return ShareLink.objects.live().filter(run_id=run_id, token=token).exists()
