"""Experiments: dataset + rubric + model + preset + settings, from which runs are launched."""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings
from django.db import models

from studio.accounts.models import Team
from studio.datasets.models import Dataset
from studio.environments.models import Environment
from studio.rubrics.models import Rubric


class Experiment(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="experiments")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="experiments")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="experiments")
    # Optional: none means one turn per prompt. Pinned to a version, so editing the environment
    # changes no experiment until it is saved again with the new version.
    environment = models.ForeignKey(Environment, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="experiments")  # fmt: skip
    environment_version = models.PositiveIntegerField(null=True, blank=True)
    model_path = models.CharField(max_length=1000, help_text="Local folder or hub id of a causal LM.")
    preset = models.CharField(max_length=50, blank=True)
    # RunSpec sections other than data and rubric (which come from the dataset and rubric rows):
    # {"model": {...but path}, "algorithm": {...}, "rollout": {...}, "optim": {...}, ...}
    config = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.name

    @property
    def generates_prompts(self) -> bool:
        """Whether the settings generate the prompts (data.procedural), leaving the dataset unread."""
        return bool((self.config.get("data") or {}).get("procedural"))

    def spec_config(self, name: str | None = None) -> dict[str, Any]:
        """The full RunSpec config dict (not yet validated). Reads dataset, rubric and the environment's
        pinned version: two to four queries."""
        config = copy.deepcopy(self.config)
        config["name"] = name or self.name
        config["model"] = {**config.get("model", {}), "path": self.model_path}
        options = _data_options(config.get("data", {}))
        # Generated prompts replace the dataset's rows: the spec refuses both sources at once.
        config["data"] = options if options.get("procedural") else {**self.dataset.data_spec(), **options}
        config["rubric"] = copy.deepcopy(self.rubric.spec)
        if self.environment_id:
            config["environment"] = copy.deepcopy(self.environment.config_of(self.environment_version))
        return config


def _data_options(data: dict[str, Any]) -> dict[str, Any]:
    """Data options an experiment may set itself (limits, templates); the mapping belongs to the dataset."""
    mapping = {"path", "format", "split", "prompt_field", "messages_field", "answer_field", "extra_fields"}
    return {k: v for k, v in data.items() if k not in mapping}
