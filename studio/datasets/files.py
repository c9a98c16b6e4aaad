"""Read dataset files as a stream of rows: preview, count and check the field mapping
without holding the file in memory. Parsing only: no user code runs here.

Formats: JSON Lines, CSV, Parquet (row groups), and a Hugging Face dataset folder
(`save_to_disk` Arrow files, or a folder of jsonl/csv/parquet files per split).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.data import FieldMapping, RowError, map_row

EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
PREVIEW_ROWS = 20
MAX_ERRORS = 50


class DatasetFileError(ValueError):
    """The file as a whole cannot be read (wrong format, missing); the message names it."""


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


def detect_format(path: Path) -> str:
    if path.is_dir():
        return "hf"
    try:
        return EXTENSIONS[path.suffix.lower()]
    except KeyError:
        raise DatasetFileError(
            f"{path.name}: cannot tell the format from {path.suffix!r}; use .jsonl, .csv or .parquet"
        ) from None


def iter_rows(path: Path, fmt: str, split: str = "train") -> Iterator[tuple[int, dict[str, Any] | Exception]]:
    """(row number from 1, record) pairs; a row that cannot be parsed yields its exception instead."""
    if not path.exists():
        raise DatasetFileError(f"{path}: no such file or folder")
    if fmt == "jsonl":
        yield from _jsonl(path)
    elif fmt == "csv":
        yield from _csv(path)
    elif fmt == "parquet":
        yield from _parquet(path)
    elif fmt == "hf":
        yield from _hf_folder(path, split)
    else:
        raise DatasetFileError(f"unknown format {fmt!r}")


def _jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open("rb") as fh:
        row = 0
        for line in fh:
            if not line.strip():
                continue
            row += 1
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                yield row, ValueError(f"not valid JSON: {exc}")
                continue
            yield row, record if isinstance(record, dict) else ValueError("a row must be a JSON object")


def _csv(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames:
            raise DatasetFileError(f"{path.name}: empty CSV (no header row)")
        for row, record in enumerate(reader, start=1):
            if None in record:
                yield (
                    row,
                    ValueError(
                        f"has {len(reader.fieldnames) + len(record[None])} cells, header has {len(reader.fieldnames)}"
                    ),
                )
            else:
                yield row, record


def _parquet(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise DatasetFileError(f"{path.name}: not a Parquet file ({exc})") from None
    row = 0
    for batch in parquet.iter_batches(batch_size=1024):
        for record in batch.to_pylist():
            row += 1
            yield row, record


def _hf_folder(path: Path, split: str) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa

    base = path / split if (path / split).is_dir() else path
    arrow = sorted(base.glob("*.arrow"))
    if arrow:
        row = 0
        for file in arrow:
            with pa.memory_map(str(file)) as source:
                for batch in pa.ipc.open_stream(source):
                    for record in batch.to_pylist():
                        row += 1
                        yield row, record
        return
    files = sorted(p for p in base.rglob("*") if p.suffix.lower() in EXTENSIONS and split in p.name) or sorted(
        p for p in base.rglob("*") if p.suffix.lower() in EXTENSIONS
    )
    if not files:
        raise DatasetFileError(f"{path}: no .arrow, .jsonl, .csv or .parquet files for split {split!r}")
    offset = 0
    for file in files:
        last = 0
        for last, record in iter_rows(file, EXTENSIONS[file.suffix.lower()]):
            yield offset + last, record
        offset += last


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
    for row, record in iter_rows(path, fmt, split):
        report.row_count += 1
        if isinstance(record, Exception):
            report.add_error(row, None, str(record))
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
