"""Put a dataset's file in place and (re)read what it holds."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from studio.datasets.files import DatasetFileError, Inspection, detect_format, inspect_dataset
from studio.datasets.models import READY, Dataset
from studio.experiments.paths import policy_for
from trainers.access import DATA, Refused


def save_upload(upload: UploadedFile) -> Path:
    """Move (large) or copy in chunks (small) the upload to the data dir; never read whole into memory."""
    name = Path(upload.name or "data").name
    dest = uploads_dir() / uuid.uuid4().hex / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = getattr(upload, "temporary_file_path", None)
    if temp:
        shutil.move(temp(), dest)
    else:
        with dest.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
    return dest


def uploads_dir() -> Path:
    return Path(settings.DATA_DIR).resolve() / "datasets"


def discard_upload(path: str | Path) -> None:
    """Delete an uploaded file's own folder (DATA_DIR/datasets/<uuid>/); anything else is left alone."""
    folder = Path(path).resolve().parent
    if folder.parent == uploads_dir():
        shutil.rmtree(folder, ignore_errors=True)


def server_path(raw: str) -> Path:
    """A server-side path the studio may read: it must exist and lie under STUDIO_DATASET_ROOTS,
    and so must every file inside it, each where it really lies (symbolic links followed): the
    path policy's rule for data (studio.experiments.paths, trainers.access).

    The studio's own data folder (STUDIO_DATA_DIR) is refused, but for its demo folder: it holds
    the secret key, the database, the first login and every team's uploads and run outputs, and the
    default roots include it (it sits inside the repository). A folder holding it is refused too,
    since a Hugging Face folder is read recursively.
    """
    return _checked(raw, None)


def readable(dataset: Dataset) -> Path:
    """The dataset's file or folder, checked again by the path policy before it is read (a preview,
    a check): files under a registered folder may have changed since. DatasetFileError if refused.
    An upload is the studio's own file in its own folder."""
    if dataset.source == "upload":
        return Path(dataset.path)
    return _checked(dataset.path, dataset.team if dataset.team_id else None)


def _checked(raw: str, team) -> Path:
    try:
        return policy_for(team).check(raw, DATA)
    except Refused as exc:
        raise DatasetFileError(str(exc)) from None


def guess_format(path: Path, fmt: str | None) -> str:
    return fmt if fmt and fmt != "auto" else detect_format(path)


def refresh(dataset: Dataset) -> Dataset:
    """Check every row here, in this process (the demo's and the tests' small files; the studio's
    requests check a bounded head and leave the rest to a worker, see studio.datasets.checks)."""
    report = inspect(dataset)
    apply_report(dataset, report)
    dataset.size_bytes = size_of(Path(dataset.path))
    dataset.status, dataset.status_detail = READY, ""
    return dataset


def inspect(dataset: Dataset, **bounds: Any) -> Inspection:
    """Stream the dataset's file with its mapping: columns, row count, mapping errors (naming row and
    field) and prompt lengths; `bounds` (max_rows, max_chars, progress) as inspect_dataset takes them."""
    return inspect_dataset(
        readable(dataset), dataset.format, split=dataset.split, prompt_field=dataset.prompt_field or None,
        messages_field=dataset.messages_field or None, answer_field=dataset.answer_field or None,
        extra_fields=dataset.extra_fields, long_prompt_chars=settings.LONG_PROMPT_CHARS, **bounds,
    )  # fmt: skip


def apply_report(dataset: Dataset, report: Inspection) -> None:
    """What a check found, onto the dataset's fields (not saved)."""
    dataset.columns = report.columns
    dataset.row_count = report.row_count
    dataset.errors = report.errors
    dataset.error_count = report.error_count
    dataset.longest_prompt_chars = report.longest_prompt or None
    dataset.warnings = long_prompt_warnings(report, settings.LONG_PROMPT_CHARS)


def long_prompt_warnings(report: Inspection, threshold: int) -> list[dict[str, Any]]:
    """A warning when rows have prompts longer than `threshold` characters (about 4 per token)."""
    if not report.long_prompt_count:
        return []
    count, longest = report.long_prompt_count, report.longest_prompt
    return [{
        "code": "long_prompts", "rows": count, "threshold_chars": threshold, "longest_chars": longest,
        "longest_row": report.longest_prompt_row,
        "message": f"{count:,} row{'s' if count > 1 else ''} {'have' if count > 1 else 'has'} a prompt longer than "
                   f"{threshold:,} characters (about {threshold // 4:,} tokens); the longest, row "
                   f"{report.longest_prompt_row}, has {longest:,}. A run keeps only the last max_prompt_tokens "
                   "tokens of a prompt.",
    }]  # fmt: skip


def size_of(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size
