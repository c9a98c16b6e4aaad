"""The studio's report on a dataset: columns, preview, row count and the rows a run would refuse.

Reading is the trainer's own (`trainers.data.iter_records`), so what the studio previews and
checks is exactly what a run gets: the same values (CSV cells as text), the same row numbers,
the same rule for a row (`map_row`). Parsing only: no user code runs here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.data import DataError, FieldMapping, RowError, detect_format, iter_records, map_row

__all__ = [
    "PREVIEW_ROWS",
    "DatasetFileError",
    "Inspection",
    "check_row",
    "detect_format",
    "inspect_dataset",
    "iter_rows",
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

    def add_error(self, row: int, field_name: str | None, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append({"row": row, "field": field_name, "message": message})


def check_row(record: dict[str, Any], row: int, mapping: FieldMapping, report: Inspection) -> None:
    """Record the row's first failure of the field mapping, by the trainer's own rule (`map_row`)."""
    if not (mapping.prompt_field or mapping.messages_field):
        return  # nothing mapped yet: the experiment's launch names what is missing
    try:
        map_row("", row, record, mapping)
    except RowError as exc:
        report.add_error(row, exc.field, exc.reason)


def inspect_dataset(path: str | Path, fmt: str, *, split: str = "train", preview_rows: int = PREVIEW_ROWS,
                    **mapping: Any) -> Inspection:  # fmt: skip
    """One streaming pass: columns and preview from the first rows, count and mapping errors from all."""
    path = Path(path)
    report = Inspection()
    fields = FieldMapping(mapping.get("prompt_field"), mapping.get("messages_field"), mapping.get("answer_field"),
                          tuple(mapping.get("extra_fields") or ()))  # fmt: skip
    seen: dict[str, None] = {}
    for row, record in iter_records(path, fmt, split):
        report.row_count += 1
        if isinstance(record, RowError):  # unreadable row: the reader says why
            report.add_error(row, record.field, record.reason)
            continue
        if report.row_count <= preview_rows:
            report.preview.append(_jsonable(record))
            seen.update(dict.fromkeys(record))
        check_row(record, row, fields, report)
    report.columns = list(seen)
    if report.row_count == 0:
        report.add_error(0, None, "the dataset has no rows")
    return report


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(record, default=str))
