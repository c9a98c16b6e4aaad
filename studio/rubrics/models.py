"""Rubrics: weighted criteria stored as a validated trainers.spec.RubricSpec dict."""

from __future__ import annotations

from django.db import models

from studio.lib.models import TeamObject


class Rubric(TeamObject):
    spec = models.JSONField(help_text="A trainers.spec.RubricSpec as a dict.")

    @property
    def criteria(self) -> list[dict]:
        return self.spec.get("criteria", [])
