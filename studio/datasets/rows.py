"""A row added to an uploaded dataset: a playground conversation kept as a prompt to train or evaluate on.

The file is never edited in place. The dataset's rows plus the new one are written as a new upload and
the dataset points at it, so a queued run whose spec names the old file, or a finished run's
provenance (the old file's digest), still finds the bytes it read. Only the studio's own uploads in
JSON Lines take rows (a server file is the operator's; CSV and Parquet would have to be rewritten);
the conversation goes in as data through `json.dumps`, whatever it holds.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from django.db import transaction

from studio.datasets import checks, storage
from studio.datasets.files import DatasetFileError
from studio.datasets.models import Dataset

# A dataset past this size is copied by nobody's click: the copy would cost seconds and the disk as much again.
MAX_BYTES = 64 * 2**20
CONVERSATIONS_NAME = "Playground conversations"


class RowRefused(ValueError):
    """Why this dataset does not take the row, in words (the request answers 400)."""


def takes_rows(dataset: Dataset) -> bool:
    """Whether the playground may add a row to `dataset` (what its picker lists)."""
    return dataset.source == "upload" and dataset.format == "jsonl"


def conversation_row(dataset: Dataset, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The conversation as a row of `dataset`, in its own columns: the messages up to the last reply
    as the prompt (the chat in its messages column, or the last user message in its prompt column) and
    that reply as the answer, where the dataset maps one."""
    last_reply = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), None)
    prompt = messages if last_reply is None else messages[:last_reply]
    users = [m for m in prompt if m["role"] == "user"]
    if not users:
        raise RowRefused("the conversation has no user message to keep as a prompt")
    row: dict[str, Any] = {}
    if dataset.messages_field:
        row[dataset.messages_field] = [{"role": m["role"], "content": m["content"]} for m in prompt]
    elif dataset.prompt_field:
        row[dataset.prompt_field] = users[-1]["content"]
    else:
        raise RowRefused(f"dataset {dataset.name!r} maps no prompt or messages column to put the conversation in")
    if dataset.answer_field and last_reply is not None:
        row[dataset.answer_field] = messages[last_reply]["content"]
    return row


def save_conversation(team, user, dataset_id: int | None, messages: list[dict[str, Any]]) -> Dataset:
    """The conversation as the last row of the team's dataset `dataset_id`, or of a new "Playground
    conversations" dataset (None); RowRefused says why not, and then nothing is kept."""
    if dataset_id is not None and not Dataset.objects.filter(pk=dataset_id, team=team).exists():
        raise RowRefused("no dataset of the run's team has this id")
    with transaction.atomic():
        dataset = _new_conversations_dataset(team, user) if dataset_id is None else None
        try:
            return append_row(dataset_id if dataset is None else dataset.pk, messages)
        except RowRefused:
            if dataset is not None:
                storage.discard_upload(dataset.path)
            raise


def _new_conversations_dataset(team, user) -> Dataset:
    """An empty uploaded JSON Lines dataset for conversations (messages as the prompt, the reply as the answer)."""
    path = storage.uploads_dir() / uuid.uuid4().hex / "conversations.jsonl"
    path.parent.mkdir(parents=True)
    path.touch()
    return Dataset.objects.create(
        team=team, name=CONVERSATIONS_NAME, created_by=user, source="upload", format="jsonl", path=str(path),
        prompt_field="", messages_field="messages", answer_field="answer", row_count=0,
        description="Conversations saved from the playground: the messages before the last reply, and that reply.",
    )  # fmt: skip


def append_row(dataset_id: int, messages: list[dict[str, Any]]) -> Dataset:
    """Add the conversation as the last row of the dataset (locked while its new file is written, so
    two saves at once both land), check the new file's head as an upload's is, and send the rest to a
    worker's check when the file is long. RowRefused says why it cannot."""
    with transaction.atomic():
        dataset = Dataset.objects.select_for_update().get(pk=dataset_id)
        if not takes_rows(dataset):
            raise RowRefused(f"dataset {dataset.name!r} is a {dataset.get_source_display().lower()} in "
                             f"{dataset.get_format_display()}: only the studio's own JSON Lines uploads take rows")  # fmt: skip
        old = Path(dataset.path)
        if storage.size_of(old) > MAX_BYTES:
            raise RowRefused(f"dataset {dataset.name!r} is over {MAX_BYTES // 2**20} MiB; save the row to a smaller one")
        line = json.dumps(conversation_row(dataset, messages), ensure_ascii=False) + "\n"
        new = storage.uploads_dir() / uuid.uuid4().hex / old.name
        new.parent.mkdir(parents=True)
        with old.open("rb") as source, new.open("wb") as out:
            shutil.copyfileobj(source, out)
            if out.tell() and not _ends_with_newline(old):
                out.write(b"\n")
            out.write(line.encode())
        dataset.path = str(new)
        try:
            complete = checks.check_in_request(dataset)
        except DatasetFileError as exc:
            storage.discard_upload(new)
            raise RowRefused(f"the dataset with the row added cannot be read: {exc}") from None
        dataset.save()
        if not complete:
            checks.start_full_check(dataset)
    return dataset


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"
