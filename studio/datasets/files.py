"""The studio's report on a dataset: columns, preview, row count and the rows a run would refuse.

Reading is the trainer's own (`trainers.data.readers.iter_records`), so what the studio previews and
checks is exactly what a run gets: the same values (CSV cells as text), the same row numbers,
the same rule for a row (`map_row`). Parsing only: no user code runs here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.data.readers import DataError, RowError, detect_format, iter_records
from trainers.data.rows import FieldMapping, PromptRow, map_row

__all__ = [
    "PREVIEW_ROWS",
    "DatasetFileError",
    "Inspection",
    "check_row",
    "detect_format",
    "inspect_dataset",
    "iter_rows",
    "prompt_chars",
]

PREVIEW_ROWS = 20
MAX_ERRORS = 50

# The studio's names for the trainer's reader: a file the run cannot read is one the studio refuses.
DatasetFileError = DataError
iter_rows = iter_records


@dataclass
class Inspection:
    columns: list[str] = field(default_factory=list)
    preview: list[dict[str, Any]] = field(default_factory=list)
    row_count: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)  # {row, field, message}
    error_count: int = 0
    readable_rows: int = 0  # rows the reader could parse (the mapping may still fail them)
    complete: bool = True  # False when the read stopped at a bound before the end of the file
    longest_prompt: int = 0  # characters of the longest mapped prompt (chat: its contents together)
    longest_prompt_row: int | None = None
    long_prompt_count: int = 0  # rows whose prompt is longer than the threshold asked for

    def add_error(self, row: int, field_name: str | None, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append({"row": row, "field": field_name, "message": message})

    def add_prompt(self, row: int, chars: int, long_prompt_chars: int | None) -> None:
        if chars > self.longest_prompt:
            self.longest_prompt, self.longest_prompt_row = chars, row
        if long_prompt_chars is not None and chars > long_prompt_chars:
            self.long_prompt_count += 1

    @property
    def first_error(self) -> str:
        return f"row {self.errors[0]['row']}: {self.errors[0]['message']}" if self.errors else ""


def check_row(record: dict[str, Any], row: int, mapping: FieldMapping, report: Inspection) -> PromptRow | None:
    """Record the row's first failure of the field mapping, by the trainer's own rule (`map_row`);
    the mapped row when it has none."""
    if not (mapping.prompt_field or mapping.messages_field):
        return None  # nothing mapped yet: the experiment's launch names what is missing
    try:
        return map_row("", row, record, mapping)
    except RowError as exc:
        report.add_error(row, exc.field, exc.reason)
        return None


def prompt_chars(row: PromptRow) -> int:
    """A prompt's length in characters; a chat's is the length of its messages' contents together."""
    if isinstance(row.prompt, str):
        return len(row.prompt)
    return sum(len(message["content"]) for message in row.prompt)


def inspect_dataset(path: str | Path, fmt: str, *, split: str = "train", preview_rows: int = PREVIEW_ROWS,
                    max_rows: int | None = None, max_chars: int | None = None, long_prompt_chars: int | None = None,
                    progress: Callable[[Inspection], None] | None = None, **mapping: Any) -> Inspection:  # fmt: skip
    """One streaming pass: columns and preview from the first rows, count, mapping errors and
    prompt lengths from all of them, or from the first `max_rows` rows / `max_chars` characters of
    rows (then `complete` says whether that was the whole file). `progress` is called with the
    report so far after each row (it should be cheap)."""
    path = Path(path)
    report = Inspection()
    fields = FieldMapping(mapping.get("prompt_field"), mapping.get("messages_field"), mapping.get("answer_field"),
                          tuple(mapping.get("extra_fields") or ()))  # fmt: skip
    seen: dict[str, None] = {}
    chars = 0
    rows = iter_records(path, fmt, split)
    for row, record in rows:
        report.row_count += 1
        if isinstance(record, RowError):  # unreadable row: the reader says why
            report.add_error(row, record.field, record.reason)
        else:
            report.readable_rows += 1
            if report.row_count <= preview_rows:
                report.preview.append(_jsonable(record))
                seen.update(dict.fromkeys(record))
            mapped = check_row(record, row, fields, report)
            if mapped is not None:
                report.add_prompt(row, prompt_chars(mapped), long_prompt_chars)
            if max_chars is not None:
                chars += len(json.dumps(record, default=str))
        if progress is not None:
            progress(report)
        if (max_rows is not None and report.row_count >= max_rows) or (max_chars is not None and chars >= max_chars):
            report.complete = next(rows, None) is None
            break
    report.columns = list(seen)
    if report.row_count == 0:
        report.add_error(0, None, "the dataset has no rows")
    return report


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(record, default=str))
