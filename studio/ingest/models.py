"""Runs trained outside the studio: the tokens that write to one run, and the batches they wrote.

A run token is made by an editor of the run's team, shown once, and kept as its sha256 only (it
is 32 random bytes, so a fast hash is as good as a slow one): whoever holds it may write to that
one run through the ingest API, and nothing else: no reads, no other run. `IngestBatch` records
each batch id a run stored, with the digest of its body, so a batch sent again (a retry after a
dropped connection) is answered from here and stored once; the same id with another body is refused.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from studio.lib import keys
from studio.runs.models import Run

TOKEN_PREFIX = "rst_"  # "rollout studio token": recognisable in a log or a secret scanner
BATCH_ID_CHARS = 100


class RunToken(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="ingest_tokens")
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the token; the token is not kept.")
    prefix = models.CharField(max_length=12, help_text="The token's first characters, to tell tokens apart.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    revoked = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "-created"]

    @classmethod
    def issue(cls, run: Run, user=None) -> tuple[RunToken, str]:
        """A new token for `run`: (its row, the token itself, which only this answer ever holds)."""
        token = keys.new_key(TOKEN_PREFIX)
        row = cls.objects.create(run=run, digest=keys.digest(token), prefix=token[: len(TOKEN_PREFIX) + 4],
                                 created_by=user if user is not None and user.is_authenticated else None)  # fmt: skip
        return row, token

    @classmethod
    def live(cls, token: str) -> RunToken | None:
        """The unrevoked row of `token`, with its run; None for anything else."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX) or len(token) > 100:
            return None
        return cls.objects.filter(digest=keys.digest(token), revoked__isnull=True).select_related("run").first()

    def revoke(self) -> None:
        if self.revoked is None:
            self.revoked = timezone.now()
            self.save(update_fields=["revoked"])

    def summary(self) -> dict:
        return {"id": self.pk, "run": self.run_id, "prefix": self.prefix, "created": self.created.isoformat(),
                "revoked": self.revoked.isoformat() if self.revoked else None,
                "last_used": self.last_used.isoformat() if self.last_used else None}  # fmt: skip


class IngestBatch(models.Model):
    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="ingest_batches")
    batch_id = models.CharField(max_length=BATCH_ID_CHARS)
    digest = models.CharField(max_length=64, help_text="sha256 of the batch's items as canonical JSON.")
    stored = models.JSONField(default=dict, help_text="What the batch stored: {metrics, rollouts, logs, skipped...}.")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "batch_id"], name="one_batch_per_run_id")]
