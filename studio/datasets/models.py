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

    @property
    def valid_rows(self) -> int:
        """Rows a run can use (the check records one error per row it cannot use)."""
        return max((self.row_count or 0) - self.error_count, 0)

    @property
    def rows_summary(self) -> str:
        """What the pages say of a checked dataset with invalid rows ("3 of 4 rows invalid"); "" otherwise."""
        if self.status == CHECKING or not self.error_count or not self.row_count:
            return ""
        return f"{self.error_count:,} of {self.row_count:,} rows invalid"

    def invalid_rows_text(self, shown: int = 3) -> str:
        """The invalid rows in words: how many, and the first few with what is wrong with each."""
        rows = []
        for error in self.errors[:shown]:
            where = f"row {error.get('row')}" + (f", field {error['field']!r}" if error.get("field") else "")
            rows.append(f"{where}: {error.get('message')}")
        more = f"; {self.error_count - len(rows):,} more on the dataset's page" if self.error_count > len(rows) else ""
        return f"{self.rows_summary} in {self.name!r} ({'; '.join(rows)}{more})"

    def _mapping_may_help(self) -> bool:
        """Whether every invalid row shown lacks a field the mapping names: then the rows may hold it
        under another name, which the mapping (not the file) fixes."""
        return bool(self.errors) and all(e.get("field") and e.get("message") == "missing" for e in self.errors)

    def missing_fields_text(self) -> str | None:
        """When every invalid row listed only lacks a field the mapping names (rows uploaded with other field
        names): that once, with the fields the rows have and what to map, instead of one identical line per
        row and "fix the file" (issue 39). None otherwise."""
        if not self._mapping_may_help():
            return None
        roles = {self.prompt_field: "prompt", self.messages_field: "chat messages", self.answer_field: "answer"}
        parts = []
        for key in dict.fromkeys(e["field"] for e in self.errors):
            role = roles.get(key, "extra field")
            parts.append(f"the {role} field {key!r}")
        who = "no row has" if not self.valid_rows else f"{self.error_count:,} of {self.row_count:,} rows lack"
        have = ", ".join(self.columns) if self.columns else "none that could be read"
        targets = " and ".join(dict.fromkeys(roles.get(e["field"], e["field"]) for e in self.errors))
        return f"{who} {' or '.join(parts)}; rows have fields: {have}: map one to {targets} in the field mapping"

    def choice_problem(self, skip_invalid_rows: bool = False) -> str | None:
        """Why an experiment cannot use this dataset, in words that help (which rows, what is wrong,
        what to do), or None. A dataset still being checked may be chosen (launching waits for it)."""
        if self.status == REFUSED:
            return f"dataset {self.name!r} was refused: {self.status_detail}"
        if self.status == CHECKING or not self.error_count:
            return None
        mapping = ("; if the rows hold that field under another name, change the dataset's field mapping"
                   if self._mapping_may_help() else "")  # fmt: skip
        if not self.valid_rows and (missing := self.missing_fields_text()):
            return f"no row can be used in {self.name!r}: {missing} (the dataset's page)."
        if not self.valid_rows:
            return f"no row can be used: {self.invalid_rows_text()}. Fix the file and add it again{mapping}."
        if skip_invalid_rows:
            return None
        return (f"{self.invalid_rows_text()}. A run stops at the first invalid row. Fix those rows in the file (or "
                f"drop them) and add it again{mapping}; or tick “skip invalid rows” (Data section: "
                f"data.skip_invalid_rows) to train on the {self.valid_rows:,} valid row{'s' if self.valid_rows != 1 else ''} "
                "only.")  # fmt: skip

    def launch_problem(self, skip_invalid_rows: bool = False) -> str | None:
        """Why a run cannot start on this dataset (naming it), or None."""
        if self.status == CHECKING:
            return f"dataset {self.name!r} is still being checked ({self.row_count or 0:,} rows so far); wait until it is ready"
        if problem := self.choice_problem(skip_invalid_rows):
            return problem
        if not self.row_count:
            return f"dataset {self.name!r} has no rows"
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
