"""The one reader of dataset files: JSONL (or a JSON list), CSV, Parquet, Arrow, and local Hugging Face
dataset folders. A run's `load_rows` and the studio's preview and check both read through
`iter_records`, so a row the studio shows is the row a run gets, value for value.

Every error names the file, the row and the field, so a user can fix the data.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson

from trainers.data import text_encoding

_EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}


# A dataset folder may also hold the Arrow shards of `save_to_disk`, next to its metadata files.
_FOLDER_FILES = {**_EXTENSIONS, ".arrow": "arrow"}


# JSON files that sit in dataset and model folders and hold settings, not rows.
_NOT_ROWS = {
    "config.json", "dataset_dict.json", "dataset_info.json", "dataset_infos.json", "state.json",
    "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "preprocessor_config.json", "chat_template.json", "adapter_config.json",
    "trainer_state.json", "training_args.json",
}  # fmt: skip


# A folder holding weights or a tokenizer is a model or a checkpoint: nothing in it (or below it) is
# read as rows, even its .json files.
_MODEL_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx", ".h5", ".msgpack")


_MODEL_MARKERS = ("tokenizer_config.json", "tokenizer.json", "adapter_config.json")


# The words that name a split in a data file's name or folder, as `datasets.load_dataset(folder)` reads them.
_SPLIT_ALIASES = {
    word: split
    for split, words in {
        "train": ("train", "training"),
        "validation": ("validation", "valid", "val", "dev"),
        "test": ("test", "testing", "eval", "evaluation"),
    }.items()
    for word in words
}


_BATCH_ROWS = 1024


_JSON_CHUNK = 1 << 16  # bytes (characters, by `_json_list_exact`) of a JSON list read at a time


_SPACE = re.compile(r"[ \t\n\r]*")


Record = dict[str, Any]


class DataError(ValueError):
    """Bad dataset input; the message names the file, row and field."""


class RowError(DataError):
    """One row cannot be parsed, or fails the field mapping. `field` (None when the row itself is
    unreadable) and `reason` are what the studio's dataset check lists per row ("prompt",
    "missing"); the message is the whole sentence a failed run shows."""

    def __init__(self, message: str, *, field: str | None, reason: str) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason


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
            f"use one of {', '.join(_EXTENSIONS)} or set the format"
        ) from None


def iter_records(path: str | Path, fmt: str = "auto", split: str = "train") -> Iterator[tuple[int, Record | RowError]]:
    """(row number from 1, record) pairs of a dataset file or folder, read as a stream.

    A row that cannot be parsed comes as a `RowError` in its record's place, and the rows after it
    still come: the studio lists every bad row, a run stops at the first. A file that cannot be read
    at all raises `DataError`. In JSON Lines the row number is the line number (what an editor
    shows); elsewhere it counts rows, across a folder's files too.

    CSV cells are text exactly as written, and an empty cell is null: no guessing of numbers, so
    an answer "007" stays "007" and a prompt "42" stays a prompt.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    fmt = detect_format(path, fmt)
    if fmt == "hf":
        if not path.is_dir():
            raise DataError(f"{path.name}: a Hugging Face dataset is a folder; set the format of a file")
        return _folder_rows(path, _split_files(path, split))
    if path.is_dir():
        raise DataError(f"{path.name}: is a folder; read it with the format 'hf'")
    if fmt not in _READERS:
        raise DataError(f"{path.name}: unknown format {fmt!r}")
    return _guarded(path.name, _READERS[fmt](path, path.name))


def read_records(path: str | Path, fmt: str = "auto", split: str = "train") -> list[tuple[int, Record]]:
    """Every (row number, record) pair, for small files such as `score` pairs; raises the first bad row."""
    records = []
    for row, record in iter_records(path, fmt, split):
        if isinstance(record, RowError):
            raise record
        records.append((row, record))
    return records


def _guarded(name: str, rows: Iterator[tuple[int, Record | RowError]]) -> Iterator[tuple[int, Record | RowError]]:
    """A read that breaks half-way (a truncated file, an I/O error) fails the file, saying how far it got."""
    row = 0
    try:
        for row, record in rows:
            yield row, record
    except DataError:
        raise
    # pyarrow's errors subclass these; a TypeError here is an Arrow type it cannot convert
    except (OSError, ValueError, TypeError, NotImplementedError, csv.Error) as exc:
        where = f" after row {row}" if row else ""
        raise DataError(f"{name}: cannot read{where}: {exc}") from exc


def _object(item: Any, name: str, unit: str, row: int) -> Record | RowError:
    if isinstance(item, dict):
        return item
    reason = f"a row must be a JSON object, got {type(item).__name__}"
    return RowError(f"{name} {unit} {row}: {reason}", field=None, reason=reason)


def _json_rows(path: Path, name: str) -> Iterator[tuple[int, Record | RowError]]:
    """JSON Lines, parsed line by line so that a bad line is one bad row; a .json file may instead
    hold one list of objects (what `json.dump(rows)` writes)."""
    if path.suffix.lower() == ".json" and _starts_a_list(path, name):
        yield from _json_list(path, name)
        return
    looks = None  # a file is in one encoding: named once, from its first line that is not UTF-8
    for lineno, line in _text_lines(path, name):
        if isinstance(line, UnicodeDecodeError):
            looks = looks or text_encoding.looks_like(line.object)
            reason = _not_utf8(line, looks)
            yield lineno, RowError(f"{name} line {lineno}: {reason}", field=None, reason=reason)
            continue
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            yield lineno, RowError(f"{name} line {lineno}: invalid JSON: {exc.msg} (column {exc.colno})",
                                   field=None, reason=f"not valid JSON: {exc.msg} (column {exc.colno})")  # fmt: skip
        else:
            yield lineno, _object(item, name, "line", lineno)


def _text_encoding(path: Path, name: str) -> tuple[str, str]:
    """(codec, label) to read a text file with: UTF-8 (a UTF-8 BOM is dropped), or UTF-16/32 when
    the file starts with their byte-order mark. A file whose first bytes are not text at all
    (UTF-16/32 without a mark, binary data) fails as a whole, naming what it looks like and where;
    stray bytes that are not UTF-8 in text are bad lines, reported one by one."""
    with path.open("rb") as fh:
        head = fh.read(text_encoding.SNIFF_BYTES)
    marked = text_encoding.bom(head)
    if marked:
        return marked
    guess = text_encoding.whole_file_guess(head)
    if guess:
        what, at = guess
        line = head.count(b"\n", 0, at) + 1
        raise DataError(f"{name}: not UTF-8 text: looks like {what} (byte {at}, line {line}); save it as UTF-8")
    return "utf-8", "UTF-8"


def _text_lines(path: Path, name: str) -> Iterator[tuple[int, str | UnicodeDecodeError]]:
    """(line number from 1, text) of a text file. UTF-8 is decoded line by line, so that bytes that
    are not UTF-8 are one bad line (its UnicodeDecodeError in the text's place; a UTF-8 character
    never spans a newline). UTF-16/32 text is decoded as a stream; a decoding error there fails the
    file, since the lines after it cannot be found."""
    codec, label = _text_encoding(path, name)
    with path.open("rb") as fh:
        if codec == "utf-8":
            for lineno, raw in enumerate(fh, start=1):
                try:
                    yield lineno, (raw.removeprefix(codecs.BOM_UTF8) if lineno == 1 else raw).decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield lineno, exc
            return
        lineno = 0
        try:
            for lineno, text in enumerate(io.TextIOWrapper(fh, encoding=codec, newline=""), start=1):
                yield lineno, text
        except UnicodeDecodeError as exc:
            raise DataError(f"{name} line {lineno + 1}: not valid {label} text ({exc.reason})") from None


def _not_utf8(exc: UnicodeDecodeError, looks: str) -> str:
    """Why a line is not UTF-8 text, with what its bytes look like (`text_encoding.looks_like`)."""
    return f"not UTF-8 text ({exc.reason} at byte {exc.start}; looks like {looks})"


def _starts_a_list(path: Path, name: str) -> bool:
    codec, _ = _text_encoding(path, name)
    with path.open(encoding="utf-8-sig" if codec == "utf-8" else codec, errors="replace") as fh:
        return fh.read(_JSON_CHUNK).lstrip().startswith("[")


def _json_list(path: Path, name: str) -> Iterator[tuple[int, Record | RowError]]:
    """The items of a top-level JSON list, parsed as a stream by ijson (yajl's C parser) from
    `_JSON_CHUNK` bytes at a time, so a large file is never held whole.

    A file ijson refuses is read again by `_json_list_exact` from the row ijson stopped at: yajl
    gives no line or column and words its errors its own way, and it refuses what `json.dump` writes
    and `json.loads` reads back (NaN, Infinity, integers past 64 bits, floats past the double
    range), which a JSON Lines row may hold. So the .json list reads what the standard library reads,
    and a broken one names the line, column and reason that `json.loads` would."""
    codec, _ = _text_encoding(path, name)
    row = 0
    with path.open("rb") if codec == "utf-8" else _Utf8Reader(path.open(encoding=codec)) as fh:
        if codec == "utf-8" and fh.read(len(codecs.BOM_UTF8)) != codecs.BOM_UTF8:
            fh.seek(0)
        try:
            for item in ijson.items(fh, "item", use_float=True, buf_size=_JSON_CHUNK):
                row += 1
                yield row, _object(item, name, "row", row)
            return
        except ijson.JSONError:
            pass
    for again, record in _json_list_exact(path, name):
        if again > row:
            yield again, record


class _Utf8Reader:
    """A UTF-16/32 text file read as UTF-8 bytes, which is what yajl parses."""

    def __init__(self, text: io.TextIOBase) -> None:
        self.text = text

    def read(self, size: int) -> bytes:
        return self.text.read(size).encode("utf-8")

    def __enter__(self) -> _Utf8Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.text.close()


def _json_list_exact(path: Path, name: str) -> Iterator[tuple[int, Record | RowError]]:
    """The items of a top-level JSON list as the standard library's decoder reads them, decoded one
    at a time from a window of the text. A syntax error fails the file (nothing after it can be
    found), naming the line and column `json.loads` would name for the whole text."""
    decoder = json.JSONDecoder()
    codec, _ = _text_encoding(path, name)
    with path.open(encoding="utf-8-sig" if codec == "utf-8" else codec) as fh:
        buf, pos = "", 0
        lines_dropped = columns_dropped = 0  # where the window starts in the file, for error positions

        def more() -> bool:
            nonlocal buf
            chunk = fh.read(max(_JSON_CHUNK, len(buf)))  # doubling: one huge item costs linear time
            buf += chunk
            return bool(chunk)

        def skip_space() -> None:
            nonlocal pos
            pos = _SPACE.match(buf, pos).end()
            while pos == len(buf) and more():
                pos = _SPACE.match(buf, pos).end()

        def error(message: str, at: int) -> DataError:
            line_start = buf.rfind("\n", 0, at) + 1
            line = lines_dropped + buf.count("\n", 0, at) + 1
            column = at - line_start + 1 + (columns_dropped if line_start == 0 else 0)
            return DataError(f"{name} line {line} column {column}: invalid JSON: {message}")

        skip_space()
        if buf[pos : pos + 1] != "[":
            raise error("expected a list of objects", pos)
        pos += 1
        row = 0
        while True:
            if pos > _JSON_CHUNK:  # drop the parsed text (json.dump writes the whole list on one line)
                newlines = buf.count("\n", 0, pos)
                lines_dropped += newlines
                columns_dropped = pos - buf.rfind("\n", 0, pos) - 1 + (0 if newlines else columns_dropped)
                buf, pos = buf[pos:], 0
            skip_space()
            if pos == len(buf):
                raise error("the list is not closed with ']'", pos)
            if buf[pos] == "]":
                pos += 1
                skip_space()
                if pos < len(buf):
                    raise error("extra data after the list", pos)
                return
            if row:
                if buf[pos] != ",":
                    raise error("expected ',' or ']' after an item", pos)
                pos += 1
                skip_space()
            while True:
                try:
                    item, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as exc:
                    if more():  # the item may just go on past the window
                        continue
                    raise error(exc.msg, exc.pos) from None
                if end < len(buf) or not more():  # a number at the window's end may go on too
                    break
            pos = end
            row += 1
            yield row, _object(item, name, "row", row)


def _csv_rows(path: Path, name: str) -> Iterator[tuple[int, Record | RowError]]:
    reader = csv.reader(_csv_lines(path, name))
    try:
        header = next((cells for cells in reader if cells), None)
        if header is None:
            raise DataError(f"{name}: empty CSV (no header row)")
        twice = sorted({key for key in header if header.count(key) > 1})
        if twice:
            raise DataError(f"{name}: the header names {', '.join(map(repr, twice))} more than once")
        row = 0
        for cells in reader:
            if not cells:  # a blank line
                continue
            row += 1
            if len(cells) != len(header):
                reason = f"has {len(cells)} cells, header has {len(header)}"
                yield row, RowError(f"{name} row {row}: {reason}", field=None, reason=reason)
            else:
                yield row, {key: cell if cell != "" else None for key, cell in zip(header, cells, strict=True)}
    except csv.Error as exc:
        raise DataError(f"{name} line {reader.line_num}: not valid CSV: {exc}") from None


def _csv_lines(path: Path, name: str) -> Iterator[str]:
    """A line that is not UTF-8 fails a CSV file: a cell may span lines, so no row is known to be
    the bad one."""
    for lineno, line in _text_lines(path, name):
        if isinstance(line, UnicodeDecodeError):
            raise DataError(f"{name} line {lineno}: {_not_utf8(line, text_encoding.looks_like(line.object))}")
        yield line


def _parquet_rows(path: Path, name: str) -> Iterator[tuple[int, Record | RowError]]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise DataError(f"{name}: not a Parquet file ({exc})") from None
    with parquet:
        row = 0
        # One row group at a time (a batch may not span two): memory is a row group, not the file,
        # and a damaged row group fails after the rows before it.
        for group in range(parquet.num_row_groups):
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=[group]):
                for record in batch.to_pylist():
                    row += 1
                    yield row, record


def _arrow_rows(path: Path, name: str) -> Iterator[tuple[int, Record | RowError]]:
    """An Arrow stream file, as `save_to_disk` writes its shards; memory-mapped, one batch at a time."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        try:
            reader = pa.ipc.open_stream(source)
        except pa.ArrowInvalid as exc:
            raise DataError(f"{name}: not an Arrow stream file as save_to_disk writes ({exc})") from None
        row = 0
        for batch in reader:
            for record in batch.to_pylist():
                row += 1
                yield row, record


_READERS = {"jsonl": _json_rows, "csv": _csv_rows, "parquet": _parquet_rows, "arrow": _arrow_rows}


def _split_files(folder: Path, split: str) -> list[tuple[Path, str]]:
    """The (file, format) pairs that hold `split` of a Hugging Face dataset folder, in order.

    A `save_to_disk` folder: a DatasetDict has one folder per split, a Dataset is its one split
    whatever the name asked. Any other folder is read as `load_dataset(folder)` does: a file or
    folder named for a split (train, validation/valid/val/dev, test/testing/eval) holds that split,
    and when none is, every data file is the train split.
    """
    if (folder / "dataset_dict.json").is_file():
        splits = _json_file(folder / "dataset_dict.json").get("splits", [])
        if split not in splits:
            raise DataError(f"{folder.name}: no split {split!r}; available splits: {', '.join(splits)}")
        return _saved_shards(folder / split)
    if (folder / "state.json").is_file():
        return _saved_shards(folder)
    by_split: dict[str | None, list[tuple[Path, str]]] = {}
    for file, kind in _data_files(folder):
        by_split.setdefault(_split_named(file.relative_to(folder)), []).append((file, kind))
    named = {key: by_split[key] for key in ("train", "validation", "test") if key in by_split}
    splits = named or {"train": by_split[None]}
    wanted = _SPLIT_ALIASES.get(split.lower(), split)
    if wanted not in splits:
        raise DataError(f"{folder.name}: no split {split!r}; available splits: {', '.join(splits)}")
    return splits[wanted]


def _data_files(folder: Path) -> list[tuple[Path, str]]:
    """(file, format) of the folder's data files, by extension, in name order. Settings files
    (dataset metadata, a model's config and tokenizer), model and checkpoint folders, and hidden or
    cache folders are not data; a folder with no data file fails, saying what it looked for."""
    found, models = [], set()
    for file in sorted(folder.rglob("*")):
        relative = file.relative_to(folder)
        if any(part.startswith((".", "__")) for part in relative.parts) or not file.is_file():
            continue  # caches, checkpoints
        if file.suffix.lower() in _MODEL_SUFFIXES or file.name in _MODEL_MARKERS:
            models.add(file.parent)
        kind = _FOLDER_FILES.get(file.suffix.lower())
        if kind and file.name not in _NOT_ROWS and not file.name.endswith(".index.json"):
            found.append((file, kind))
    found = [(file, kind) for file, kind in found if not any(model in file.parents for model in models)]
    if not found:
        skipped = "".join(f"; {_named(model, folder)} holds a model, not rows" for model in sorted(models)[:3])
        raise DataError(f"{folder.name}: no data files in the folder (looked for {', '.join(_FOLDER_FILES)}){skipped}")
    return found


def _named(path: Path, folder: Path) -> str:
    return "the folder" if path == folder else path.relative_to(folder).as_posix()


def _split_named(relative: Path) -> str | None:
    """The split a data file's folders or name give it: the first word that names one."""
    words = re.split(r"[-._ 0-9/]+", relative.as_posix().lower())
    return next((_SPLIT_ALIASES[word] for word in words if word in _SPLIT_ALIASES), None)


def _saved_shards(folder: Path) -> list[tuple[Path, str]]:
    """The Arrow shards of one saved split, in the order its state.json lists them."""
    state = folder / "state.json"
    if state.is_file():
        # only a name: a shard listed elsewhere would be a file outside the dataset
        shards = [folder / Path(entry["filename"]).name for entry in _json_file(state).get("_data_files", [])]
    else:
        shards = sorted(folder.glob("*.arrow"))
    if not shards:
        raise DataError(f"{folder.name}: no Arrow files in the saved dataset")
    return [(shard, "arrow") for shard in shards]


def _json_file(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{path.parent.name}/{path.name}: cannot read: {exc}") from None
    if not isinstance(value, dict):
        raise DataError(f"{path.parent.name}/{path.name}: expected a JSON object")
    return value


def _folder_rows(folder: Path, files: list[tuple[Path, str]]) -> Iterator[tuple[int, Record | RowError]]:
    """The rows of a split's files, numbered on from one file to the next."""
    offset = 0
    for file, kind in files:
        name = f"{folder.name}/{file.relative_to(folder).as_posix()}"
        last = 0
        for last, record in _guarded(name, _READERS[kind](file, name)):
            if isinstance(record, RowError):
                # the row number is the folder's; only the sentence says which file and line it is
                record = RowError(str(record), field=record.field, reason=str(record))
            yield offset + last, record
        offset += last
