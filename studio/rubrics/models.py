"""Rubrics: weighted criteria stored as a validated trainers.spec.RubricSpec dict."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from studio.accounts.models import Team


class Rubric(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="rubrics")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    spec = models.JSONField(help_text="A trainers.spec.RubricSpec as a dict.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.name

    @property
    def criteria(self) -> list[dict]:
        return self.spec.get("criteria", [])
