"""Model servers (one process per model, started by a worker) and the team API tokens that open
the OpenAI-compatible endpoint (`/v1/...`).

A ModelServer row is the one record of a served model: the web process creates it and asks a worker
to start the process (studio.serving.servers); the worker's task (workers.serving.task) writes where it
listens and how it ended. Requests stamp `last_used`; the task stops the process when it has been idle
for settings.SERVING_IDLE_S.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from studio.accounts.models import Team

STOPPED, STARTING, READY, STOPPING, FAILED = "stopped", "starting", "ready", "stopping", "failed"
STATES = [(s, s) for s in (STOPPED, STARTING, READY, STOPPING, FAILED)]
LIVE_STATES = (STARTING, READY)

MODELS_READ = "models:read"
INFERENCE = "inference"
SCOPES = {
    MODELS_READ: "list the models the team may use (GET /v1/models)",
    INFERENCE: "generate with them (POST /v1/chat/completions, /v1/completions)",
}


class ModelServer(models.Model):
    ref = models.CharField(
        max_length=200, unique=True, help_text='The served model: "run-12/step-40" or "run-12/base".'
    )
    model_path = models.CharField(max_length=1000, help_text="The base model (the run's model.path).")
    checkpoint = models.CharField(max_length=1000, blank=True, help_text="The checkpoint folder; empty: the base.")
    model_spec = models.JSONField(default=dict, help_text="The run's model section (dtype, LoRA) to load it with.")
    state = models.CharField(max_length=10, choices=STATES, default=STOPPED, db_index=True)
    engine = models.CharField(max_length=20, blank=True, help_text="vllm or transformers, as the worker chose.")
    worker = models.CharField(max_length=255, blank=True, help_text="The Celery node that runs the process.")
    address = models.CharField(max_length=200, blank=True, help_text="http://host:port of the process.")
    key = models.CharField(max_length=100, blank=True, help_text="The bearer key the process accepts (the web only).")
    generation = models.IntegerField(default=0, help_text="Bumped at each start: an older task's writes are refused.")
    error = models.TextField(blank=True)
    started = models.DateTimeField(null=True, blank=True)
    started_by = models.CharField(
        max_length=200, blank=True, help_text="Whose request started it: a user's name, or \"API token 'ci'\"."
    )
    last_used = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["ref"]

    def __str__(self) -> str:
        return f"{self.ref} ({self.state})"


class ApiToken(models.Model):
    """A team's key for /v1/: its scopes say what it may do. Only a hash is kept; the key is shown once."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    scopes = models.JSONField(default=list, help_text=f"Any of {sorted(SCOPES)}.")
    prefix = models.CharField(max_length=16, help_text="The key's first characters, to tell tokens apart.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["team", "-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.team}"

    @property
    def active(self) -> bool:
        return self.revoked is None
