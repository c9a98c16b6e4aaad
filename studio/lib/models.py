"""The abstract base of the objects a team keeps and edits: datasets, rubrics, environments and
experiments. Each is named, owned by a team, remembers who made it and when, and lists newest
first."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TeamObject(models.Model):
    """A named object owned by a team; `team.<model>s` lists them (`team.datasets`, `team.rubrics`...)."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="%(class)ss")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.name
