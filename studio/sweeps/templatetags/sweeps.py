"""`{% sweep_trial run %}`: on a run's page, the sweep trial it is (its values, and why it was pruned)."""

from __future__ import annotations

from typing import Any

from django import template

from studio.sweeps.driver import said
from studio.sweeps.models import Trial

register = template.Library()


@register.inclusion_tag("sweeps/run_trial.html")
def sweep_trial(run) -> dict[str, Any]:
    """One query: the run's trial row and its sweep."""
    trial = Trial.objects.select_related("sweep").filter(run_id=run.pk).first()
    return {"trial": trial, "values": said(trial.values) if trial else ""}
