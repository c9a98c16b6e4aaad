"""Environments: what a model acts in over several turns, stored as a validated
trainers.spec.EnvironmentSpec dict, with every saved config kept as a numbered version so an
experiment can pin the one it was made with."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from studio.lib.models import TeamObject


class Environment(TeamObject):
    config = models.JSONField(help_text="A trainers.spec.EnvironmentSpec as a dict (the latest version).")
    version = models.PositiveIntegerField(default=1, help_text="The number of the latest version (config).")

    @property
    def kind(self) -> str:
        return self.config.get("kind", "")

    def record_version(self, user) -> EnvironmentVersion:
        """Keep the current config as version `self.version` (call after saving a new config)."""
        return self.versions.create(number=self.version, config=self.config, created_by=user)

    def config_of(self, number: int | None) -> dict[str, Any]:
        """The config of version `number` (the latest for None). One query unless it is the latest."""
        if number is None or number == self.version:
            return self.config
        return self.versions.get(number=number).config


class EnvironmentVersion(models.Model):
    """A saved config of an environment; never changed once written."""

    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    config = models.JSONField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["environment", "number"], name="one_config_per_version")]

    def __str__(self) -> str:
        return f"{self.environment} v{self.number}"
