"""Experiments: dataset + rubric + model + preset + settings, from which runs are launched."""

from __future__ import annotations

import copy
from typing import Any

from django.db import models

from studio.datasets.models import Dataset
from studio.environments.models import Environment
from studio.lib.models import TeamObject
from studio.rubrics.models import Rubric


class Experiment(TeamObject):
    # None only for an experiment whose settings generate its prompts (data.procedural): the API and the
    # form refuse a missing dataset otherwise.
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.PROTECT,
                                related_name="experiments")  # fmt: skip
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

    @property
    def generates_prompts(self) -> bool:
        """Whether the settings generate the prompts (data.procedural) or take the environment's tasks
        (data.environment_dataset: a verifiers environment's), leaving the dataset unread."""
        return bool(self.generated_task) or self.uses_environment_tasks

    @property
    def uses_environment_tasks(self) -> bool:
        data = self.config.get("data") if isinstance(self.config, dict) else None
        return isinstance(data, dict) and data.get("environment_dataset") is True

    @property
    def generated_task(self) -> str:
        """The procedural task named in data.procedural ("" when the prompts come from the dataset)."""
        procedural = (self.config.get("data") or {}).get("procedural")
        if not procedural:
            return ""
        return str(procedural.get("task") or "?") if isinstance(procedural, dict) else "?"

    @property
    def skips_invalid_rows(self) -> bool:
        """Whether runs leave out the dataset's invalid rows (data.skip_invalid_rows) rather than stop at one."""
        data = self.config.get("data") if isinstance(self.config, dict) else None
        return isinstance(data, dict) and data.get("skip_invalid_rows") is True

    @property
    def prompt_source(self) -> str:
        """What the pages show for where the prompts come from: the dataset's name, or "generated: <task>"."""
        if self.uses_environment_tasks:
            return "the environment's tasks"
        if self.generates_prompts:
            return f"generated: {self.generated_task}"
        return str(self.dataset) if self.dataset_id else "no dataset"

    def spec_config(self, name: str | None = None) -> dict[str, Any]:
        """The full RunSpec config dict (not yet validated). Reads dataset, rubric and the environment's
        pinned version: two to four queries."""
        config = copy.deepcopy(self.config)
        config["name"] = name or self.name
        config["model"] = {**config.get("model", {}), "path": self.model_path}
        options = data_options(config.get("data", {}))
        # Generated prompts replace the dataset's rows: the spec refuses both sources at once.
        # Without a dataset (refused by the API and form unless procedural) the spec names the missing path.
        rows = self.dataset.data_spec() if self.dataset_id else {}
        config["data"] = (
            options if options.get("procedural") or options.get("environment_dataset") else {**rows, **options}
        )
        config["rubric"] = copy.deepcopy(self.rubric.spec)
        if self.environment_id:
            config["environment"] = copy.deepcopy(self.environment.config_of(self.environment_version))
        return config


def data_options(data: dict[str, Any]) -> dict[str, Any]:
    """Data options an experiment may set itself (limits, templates); the mapping belongs to the dataset."""
    mapping = {"path", "format", "split", "prompt_field", "messages_field", "answer_field", "extra_fields"}
    return {k: v for k, v in data.items() if k not in mapping}
