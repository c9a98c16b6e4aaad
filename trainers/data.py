"""Prompt datasets: read rows from JSONL/CSV/Parquet or a local Hugging Face dataset folder,
map their fields per `DataSpec`, render and tokenise the prompts, and serve them in seeded
batches that remember their position for checkpoint/resume.

Every error names the file, the row and the field, so a user can fix the data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainers.spec import DataSpec

_EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
_ROLES = ("system", "user", "assistant", "tool")


class DataError(ValueError):
    """Bad dataset input; the message names the file, row and field."""


class RowError(DataError):
    """One row fails the field mapping. `field` and `reason` are what the studio's dataset check
    lists per row ("prompt", "missing"); the message is the whole sentence a failed run shows."""

    def __init__(self, message: str, *, field: str, reason: str) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class FieldMapping:
    """Which fields of a row hold the prompt (text, or chat messages), the answer and the extras."""

    prompt_field: str | None = "prompt"
    messages_field: str | None = None
    answer_field: str | None = None
    extra_fields: tuple[str, ...] = ()

    @classmethod
    def of(cls, spec: DataSpec) -> FieldMapping:
        return cls(spec.prompt_field, spec.messages_field, spec.answer_field, tuple(spec.extra_fields))


@dataclass(frozen=True)
class PromptRow:
    """One dataset row mapped to what a run needs. `row` is 1-based (the line number for JSONL)."""

    id: str
    row: int
    prompt: str | list[dict[str, str]]  # as the user wrote it: text or chat messages
    fields: dict[str, Any]  # answer + extra fields, handed to rubric criteria by name


@dataclass(frozen=True)
class Prompt:
    """A row rendered for the model: `text` after the chat template, and its token ids."""

    row: PromptRow
    text: str
    token_ids: list[int] = field(repr=False)

    @property
    def id(self) -> str:
        return self.row.id


# ---------------------------------------------------------------- reading files


def detect_format(path: Path, fmt: str = "auto") -> str:
    if fmt != "auto":
        return fmt
    if path.is_dir():
        return "hf"
    try:
        return _EXTENSIONS[path.suffix.lower()]
    except KeyError:
        raise DataError(
            f"{path.name}: cannot tell the format from the extension {path.suffix!r}; "
            f"use one of {', '.join(_EXTENSIONS)} or set data.format"
        ) from None


def read_records(path: str | Path, fmt: str = "auto", split: str = "train") -> list[tuple[int, dict[str, Any]]]:
    """(row number, record) pairs of a dataset file or folder."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    fmt = detect_format(path, fmt)
    if fmt == "jsonl":
        return _read_jsonl(path)
    if fmt in ("csv", "parquet"):
        return _numbered(_load_builder(fmt, path, split))
    if fmt == "hf":
        return _numbered(_load_folder(path, split))
    raise DataError(f"{path.name}: unknown format {fmt!r}")


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Parsed line by line (not through `datasets`) so that a malformed line is reported by number.
    A .json file holding one list of objects is accepted too."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path.name} line {exc.lineno}: invalid JSON: {exc.msg}") from None
        return [(i, _as_object(item, path, i)) for i, item in enumerate(items, start=1)]
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path.name} line {lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        records.append((lineno, _as_object(item, path, lineno)))
    return records


def _as_object(item: Any, path: Path, row: int) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise DataError(f"{path.name} row {row}: expected a JSON object, got {type(item).__name__}")
    return item


def _load_builder(fmt: str, path: Path, split: str):
    from datasets import load_dataset

    try:
        return load_dataset(fmt, data_files={split: str(path)}, split=split)
    except Exception as exc:  # datasets wraps parser errors in several exception types
        raise DataError(f"{path.name}: cannot read as {fmt}: {exc}") from exc


def _load_folder(path: Path, split: str):
    """A `save_to_disk` folder (Dataset or DatasetDict), or a folder of data files."""
    from datasets import Dataset, DatasetDict, load_dataset, load_from_disk

    if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
        loaded = load_from_disk(str(path))
    else:
        try:
            loaded = load_dataset(str(path))
        except Exception as exc:
            raise DataError(f"{path.name}: cannot read the dataset folder: {exc}") from exc
    if isinstance(loaded, Dataset):
        return loaded
    if isinstance(loaded, DatasetDict):
        if split not in loaded:
            raise DataError(f"{path.name}: no split {split!r}; available splits: {', '.join(loaded)}")
        return loaded[split]
    raise DataError(f"{path.name}: unsupported dataset type {type(loaded).__name__}")


def _numbered(dataset) -> list[tuple[int, dict[str, Any]]]:
    return [(i, dict(rec)) for i, rec in enumerate(dataset, start=1)]


# ---------------------------------------------------------------- mapping fields


def load_rows(spec: DataSpec) -> list[PromptRow]:
    """Rows of the dataset mapped per `spec` (prompt or messages, answer, extra fields)."""
    path = Path(spec.path)
    records = read_records(path, spec.format, spec.split)
    if spec.limit is not None:
        records = records[: spec.limit]
    if not records:
        raise DataError(f"{path.name}: the dataset has no rows")
    mapping = FieldMapping.of(spec)
    return [map_row(path.name, row, rec, mapping) for row, rec in records]


def map_row(name: str, row: int, rec: dict[str, Any], mapping: FieldMapping) -> PromptRow:
    """A record as the run uses it, or `RowError` naming its first bad field. The one rule for a
    row: the studio's dataset check calls it on every row, so a row it accepts is one a run accepts."""

    def fail(field: str, reason: str, sentence: str) -> RowError:
        return RowError(f"{name} row {row}: {sentence}", field=field, reason=reason)

    def missing(key: str) -> RowError:
        available = ", ".join(map(str, rec)) or "(none)"
        return fail(key, "missing", f"field {key!r} is missing; available fields: {available}")

    def get(key: str) -> Any:
        if rec.get(key) is None:  # a null answer is no answer
            raise missing(key)
        return rec[key]

    if mapping.messages_field:
        prompt: str | list[dict[str, str]] = _messages(get(mapping.messages_field), mapping.messages_field, fail)
    else:
        value = get(mapping.prompt_field)
        if not isinstance(value, str) or not value.strip():
            reason = "must be non-empty text"
            raise fail(mapping.prompt_field, reason, f"field {mapping.prompt_field!r} {reason}, got {value!r:.60}")
        prompt = value
    fields: dict[str, Any] = {}
    if mapping.answer_field:
        fields["answer"] = get(mapping.answer_field)
    for key in mapping.extra_fields:
        if key not in rec:  # an extra field may be null; it must be there
            raise missing(key)
        fields[key] = rec[key]
    return PromptRow(id=str(row), row=row, prompt=prompt, fields=fields)


def _messages(value: Any, key: str, fail) -> list[dict[str, str]]:
    shape = "must be a non-empty list of {role, content} messages"
    if isinstance(value, str):  # CSV cells hold JSON text
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise fail(key, shape, f"field {key!r} must be a list of {{role, content}} messages, got text") from None
    if not isinstance(value, list) or not value:
        raise fail(key, shape, f"field {key!r} {shape}")
    out = []
    for i, msg in enumerate(value):
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
            raise fail(f"{key}[{i}]", "needs a text 'content'", f"field {key!r} message {i}: needs a text 'content'")
        if msg.get("role") not in _ROLES:
            reason = f"role must be one of {', '.join(_ROLES)}, got {msg.get('role')!r}"
            raise fail(f"{key}[{i}]", reason, f"field {key!r} message {i}: {reason}")
        out.append({"role": msg["role"], "content": msg["content"]})
    return out


# ---------------------------------------------------------------- rendering


def render_prompt(row: PromptRow, tokenizer, spec: DataSpec) -> Prompt:
    """Chat template when the tokenizer has one and the spec asks for it; plain text otherwise.
    Prompts longer than `max_prompt_tokens` keep their end (the question is usually last)."""
    messages = row.prompt if isinstance(row.prompt, list) else [{"role": "user", "content": row.prompt}]
    if spec.system_prompt and messages[0]["role"] != "system":
        messages = [{"role": "system", "content": spec.system_prompt}, *messages]
    text, ids = encode_chat(tokenizer, messages, use_chat_template=spec.use_chat_template)
    return Prompt(row=row, text=text, token_ids=ids[-spec.max_prompt_tokens :])


def encode_chat(tokenizer, messages: list[dict[str, str]], *, use_chat_template: bool = True) -> tuple[str, list[int]]:
    """(text, token ids) of `messages` with the assistant turn opened: through the tokenizer's chat
    template when it has one (and it is wanted), else the contents joined by blank lines."""
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return text, tokenizer(text, add_special_tokens=False).input_ids  # the template already holds them
    text = "\n\n".join(m["content"] for m in messages)
    return text, tokenizer(text).input_ids


def load_prompts(spec: DataSpec, tokenizer) -> list[Prompt]:
    return [render_prompt(row, tokenizer, spec) for row in load_rows(spec)]


class PromptSource:
    """Serves prompts in batches, epoch after epoch. The order of epoch e depends only on
    (seed, e), so the position (epoch, index) is all a checkpoint needs to resume exactly."""

    def __init__(self, prompts: list[Prompt], *, seed: int, shuffle: bool = True) -> None:
        if not prompts:
            raise DataError("no prompts to serve")
        self.prompts = prompts
        self.seed = seed
        self.shuffle = shuffle
        self.epoch = 0
        self.index = 0
        self._order = self._epoch_order(0)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.prompts))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.prompts))

    def next_batch(self, n: int) -> list[Prompt]:
        """The next n prompts, crossing into the next epoch when this one runs out."""
        out = []
        while len(out) < n:
            if self.index >= len(self.prompts):
                self.epoch += 1
                self.index = 0
                self._order = self._epoch_order(self.epoch)
            take = min(n - len(out), len(self.prompts) - self.index)
            out.extend(self.prompts[i] for i in self._order[self.index : self.index + take])
            self.index += take
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._order = self._epoch_order(self.epoch)
