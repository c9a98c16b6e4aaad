"""Datasets: a file (uploaded or already on the server) plus how its fields map to a RunSpec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import models

from studio.lib.models import TeamObject

SOURCES = (("upload", "Uploaded file"), ("server_file", "Server-side file"), ("hf_folder", "Hugging Face folder"))
FORMATS = (("jsonl", "JSON Lines"), ("csv", "CSV"), ("parquet", "Parquet"), ("hf", "Hugging Face dataset folder"))
CHECKING, READY, REFUSED = "checking", "ready", "refused"
STATUSES = ((CHECKING, "Checking every row"), (READY, "Ready"), (REFUSED, "Refused"))


class Dataset(TeamObject):
    source = models.CharField(max_length=20, choices=SOURCES)
    path = models.CharField(max_length=1000, help_text="Absolute path on the server.")
    format = models.CharField(max_length=10, choices=FORMATS)
    split = models.CharField(max_length=100, default="train")
    prompt_field = models.CharField(max_length=200, blank=True, default="prompt")
    messages_field = models.CharField(max_length=200, blank=True, default="")
    answer_field = models.CharField(max_length=200, blank=True, default="answer")
    extra_fields = models.JSONField(default=list, blank=True)
    columns = models.JSONField(default=list, blank=True)
    row_count = models.BigIntegerField(null=True, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True, help_text="[{row, field, message}], first ones only.")
    error_count = models.BigIntegerField(default=0)
    # Set `checking` by the request that adds the file or changes the mapping when the file is longer
    # than what a request reads (studio.datasets.checks); a dataset made directly has been checked.
    status = models.CharField(max_length=10, choices=STATUSES, default=READY)
    status_detail = models.TextField(blank=True, help_text="Why the dataset was refused.")
    warnings = models.JSONField(default=list, blank=True, help_text="[{code, message, ...}] from the last check.")
    longest_prompt_chars = models.BigIntegerField(null=True, blank=True)
    # Bumped by each new check, so that a check that a newer one replaced writes nothing.
    check_generation = models.PositiveIntegerField(default=0)

    @property
    def is_valid(self) -> bool:
        return self.status == READY and self.error_count == 0 and bool(self.row_count)

    def launch_problem(self) -> str | None:
        """Why a run cannot start on this dataset (naming it), or None."""
        if self.status == CHECKING:
            return f"dataset {self.name!r} is still being checked ({self.row_count or 0:,} rows so far); wait until it is ready"
        if self.status == REFUSED:
            return f"dataset {self.name!r} was refused: {self.status_detail}"
        if not self.is_valid:
            return f"the dataset has {self.error_count} errors; fix the mapping of {self.name!r} first"
        return None

    def data_spec(self) -> dict[str, Any]:
        """The `data` section of a RunSpec for this dataset (the rest keeps RunSpec defaults)."""
        return {
            "path": self.path,
            "format": self.format,
            "split": self.split,
            "prompt_field": self.prompt_field or None,
            "messages_field": self.messages_field or None,
            "answer_field": self.answer_field or None,
            "extra_fields": list(self.extra_fields),
        }

    @property
    def file_name(self) -> str:
        return Path(self.path).name
