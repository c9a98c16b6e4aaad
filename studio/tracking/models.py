"""Tracker secrets, mirror settings (a team's defaults, an experiment's own) and each run's mirror status."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from studio.tracking.schema import NAME_PATTERN, TRACKERS

TRACKER_CHOICES = [(name, name) for name in TRACKERS]


class TrackerSecret(models.Model):
    """A credential of a team (a W&B API key, an MLflow token or user:password, a Trackio write token),
    stored encrypted (studio.tracking.secrets). The API and pages take a value and never give it back.

    `endpoint` is the server it was set for (trainers.access.endpoint_base: scheme://host:port/path): the
    worker sends the value there only, and a mirror pointed elsewhere goes without it."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="tracker_secrets")
    name = models.CharField(max_length=100, validators=[RegexValidator(NAME_PATTERN)])
    kind = models.CharField(max_length=20, choices=TRACKER_CHOICES)
    ciphertext = models.BinaryField(editable=False)
    endpoint = models.CharField(
        max_length=600, blank=True, help_text="The server the secret may be sent to; empty: none (set it again)."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="tracker_secret_unique_name")]

    def __str__(self) -> str:
        return self.name


class MirrorDefaults(models.Model):
    """A team's mirror settings, used by every experiment that does not set its own."""

    team = models.OneToOneField("accounts.Team", on_delete=models.CASCADE, related_name="mirror_defaults")
    settings = models.JSONField(default=dict)
    updated = models.DateTimeField(auto_now=True)


class ExperimentMirror(models.Model):
    """An experiment's mirror settings: its own (`inherit` False) or the team's defaults."""

    experiment = models.OneToOneField("experiments.Experiment", on_delete=models.CASCADE, related_name="mirror")
    inherit = models.BooleanField(default=True)
    settings = models.JSONField(default=dict)
    updated = models.DateTimeField(auto_now=True)


STARTING, OK, FAILING, DONE, FAILED = "starting", "ok", "failing", "done", "failed"
STATES = [(s, s) for s in (STARTING, OK, FAILING, DONE, FAILED)]


class MirrorStatus(models.Model):
    """How one run's mirror to one tracker goes, written by the worker's mirror thread: the run page shows it.
    `failing`: the last call failed, and the mirror goes on trying with the next step; `failed`: the
    tracker could not be started or finished."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="mirrors")
    tracker = models.CharField(max_length=20, choices=TRACKER_CHOICES)
    state = models.CharField(max_length=20, choices=STATES, default=STARTING)
    location = models.CharField(max_length=1000, blank=True, help_text="Where the run is: a URL or a folder.")
    steps_sent = models.PositiveIntegerField(default=0)
    rollouts_sent = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    dropped = models.PositiveIntegerField(default=0, help_text="Reports left out because the mirror fell behind.")
    last_error = models.TextField(blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tracker"]
        constraints = [models.UniqueConstraint(fields=["run", "tracker"], name="mirror_status_unique_tracker")]

    def summary(self) -> dict:
        return {
            "tracker": self.tracker, "state": self.state, "location": self.location, "steps_sent": self.steps_sent,
            "rollouts_sent": self.rollouts_sent, "failures": self.failures, "dropped": self.dropped,
            "last_error": self.last_error, "updated": self.updated.isoformat() if self.updated else None,
        }  # fmt: skip
