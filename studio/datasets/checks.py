"""Checking a dataset's file: a bounded look in the request, every row on a worker.

The request that adds a dataset, or changes its mapping, reads at most HEAD_ROWS rows and about
HEAD_CHARS characters of them: enough to refuse a file that is no dataset at all (not text, not its
format, no row that can be read) before it is kept, and to show its columns at once. A file that
ends within that is checked whole there. A longer one is saved `checking`, and the task
`workers.check_dataset` (default queue) reads every row off the request path, writing the count so
far as it goes, and ends it `ready`, or `refused` with the reason when no row can be read (an
uploaded file is then deleted). Parsing only: no user code runs here.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from django.db import transaction

from studio.celery import CHECK_DATASET_TASK
from studio.celery import app as celery_app
from studio.datasets import storage
from studio.datasets.files import DatasetFileError, Inspection
from studio.datasets.models import CHECKING, READY, REFUSED, Dataset

log = logging.getLogger(__name__)

HEAD_ROWS = 1000
HEAD_CHARS = 4_000_000  # about 4 MB of rows: a request's share of the reading stays well under a second
PROGRESS_EVERY_S = 1.0
# What a check finds, written onto the dataset.
FINDINGS = ("columns", "row_count", "errors", "error_count", "longest_prompt_chars", "warnings", "size_bytes",
            "check_generation", "status", "status_detail")  # fmt: skip
SUPERSEDED = "superseded"  # the task's answer when a newer check (or a deletion) replaced its own


def check_in_request(dataset: Dataset) -> bool:
    """Read the head of the dataset's file into its fields (not saved) and start a new check
    generation; True when the head was the whole file (the dataset is then `ready`), False when a
    worker must read the rest (`checking`). DatasetFileError, naming the file, when the file cannot
    be read or no row of its head can."""
    report = storage.inspect(dataset, max_rows=HEAD_ROWS, max_chars=HEAD_CHARS)
    if not report.readable_rows:
        raise DatasetFileError(unreadable(dataset, report))
    storage.apply_report(dataset, report)
    dataset.size_bytes = storage.size_of(Path(dataset.path))
    dataset.check_generation += 1  # an older check still running writes nothing from now on
    dataset.status, dataset.status_detail = (READY if report.complete else CHECKING), ""
    return report.complete


def start_full_check(dataset: Dataset) -> None:
    """Send the worker's check of every row once the transaction commits (so the worker finds the row)."""
    pk, generation = dataset.pk, dataset.check_generation
    transaction.on_commit(lambda: _send(pk, generation))


def _send(pk: int, generation: int) -> None:
    try:
        celery_app.send_task(CHECK_DATASET_TASK, args=[pk, generation])
    except Exception as exc:  # noqa: BLE001 - kombu's connection errors vary by transport
        detail = (
            f"could not reach the task broker to check every row ({type(exc).__name__}: {exc}); save again to retry"
        )
        Dataset.objects.filter(pk=pk, check_generation=generation).update(status_detail=detail)


def requeue_checking() -> list[int]:
    """Send the checks of every dataset still `checking` again: an embedded Redis keeps no messages
    across a restart. A check whose message survived runs twice; both write the same findings."""
    waiting = list(Dataset.objects.filter(status=CHECKING).values_list("pk", "check_generation"))
    for pk, generation in waiting:
        _send(pk, generation)
    return [pk for pk, _ in waiting]


def check_every_row(dataset_id: int, generation: int) -> str:
    """The worker's pass over every row: the dataset ends `ready` with its full report, or
    `refused`. Writes only while `generation` is the dataset's latest check; returns the status set,
    or SUPERSEDED."""
    this_check = Dataset.objects.filter(pk=dataset_id, check_generation=generation)
    dataset = this_check.first()
    if dataset is None:
        return SUPERSEDED
    last_write = time.monotonic()

    def progress(report: Inspection) -> None:
        nonlocal last_write
        if time.monotonic() - last_write >= PROGRESS_EVERY_S:
            last_write = time.monotonic()
            this_check.update(row_count=report.row_count)

    try:
        report = storage.inspect(dataset, progress=progress)
    except DatasetFileError as exc:
        return refuse(dataset, generation, str(exc))
    if not report.readable_rows:
        return refuse(dataset, generation, unreadable(dataset, report))
    storage.apply_report(dataset, report)
    fields = ("columns", "row_count", "errors", "error_count", "longest_prompt_chars", "warnings")
    done = this_check.update(status=READY, status_detail="", **{name: getattr(dataset, name) for name in fields})
    return READY if done else SUPERSEDED


def refuse(dataset: Dataset, generation: int, reason: str, *, keep_file: bool = False) -> str:
    """Mark the dataset refused with the reason; an uploaded file is deleted (unless `keep_file`:
    the check failed, not the file). Nothing happens when a newer check replaced this one."""
    if not Dataset.objects.filter(pk=dataset.pk, check_generation=generation).update(
        status=REFUSED, status_detail=reason
    ):
        return SUPERSEDED
    if dataset.source == "upload" and not keep_file:
        storage.discard_upload(dataset.path)
    log.info("dataset %s refused: %s", dataset.pk, reason)
    return REFUSED


def unreadable(dataset: Dataset, report: Inspection) -> str:
    """Why a file in which no row can be read is refused, with the first row's reason."""
    if report.row_count == 0:
        return f"{dataset.file_name}: the file has no rows"
    scope = f"its {report.row_count:,} rows" if report.complete else f"its first {report.row_count:,} rows"
    return f"{dataset.file_name}: none of {scope} can be read ({report.first_error})"
