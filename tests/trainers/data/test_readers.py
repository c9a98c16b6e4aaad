"""The one dataset reader (`trainers.data.readers.iter_records`): streamed (row, record) pairs from JSON Lines,
a .json list, CSV, Parquet and Hugging Face folders; a bad row comes in its place, a bad file raises."""

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainers.data import readers
from trainers.data.prompts import load_rows
from trainers.data.readers import DataError, RowError, iter_records, read_records
from trainers.spec import DataSpec

ROWS = [{"prompt": f"q{i}", "answer": str(i)} for i in range(5)]


def rows_of(path, **kw) -> list:
    return [(row, rec if isinstance(rec, dict) else str(rec)) for row, rec in iter_records(path, **kw)]


# ---------------------------------------------------------------- JSON Lines and .json lists


def test_a_jsonl_row_is_numbered_by_its_line_and_a_bad_line_is_one_bad_row(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"prompt": "a"}\n\n{"prompt": }\n[1, 2]\n\xff\xfe\n{"prompt": "b"}\n'  # BOM, blank line
    )
    got = list(iter_records(path))
    assert [row for row, _ in got] == [1, 3, 4, 5, 6]
    assert got[0][1] == {"prompt": "a"} and got[-1][1] == {"prompt": "b"}
    bad = {row: rec for row, rec in got if isinstance(rec, RowError)}
    assert str(bad[3]).startswith("d.jsonl line 3: invalid JSON: Expecting value")
    assert bad[3].reason.startswith("not valid JSON") and bad[3].field is None
    assert str(bad[4]) == "d.jsonl line 4: a row must be a JSON object, got list"
    assert str(bad[5]).startswith("d.jsonl line 5: not UTF-8 text")  # not taken for UTF-16


def test_a_json_file_may_hold_one_list_of_objects(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(ROWS, indent=2))
    assert rows_of(path) == list(enumerate(ROWS, start=1))
    path.write_text(json.dumps([ROWS[0], "text", ROWS[1]]))
    assert rows_of(path) == [(1, ROWS[0]), (2, "d.json row 2: a row must be a JSON object, got str"), (3, ROWS[1])]
    path.write_text(" [ ] ")
    assert rows_of(path) == []


def test_a_json_list_is_read_in_windows_not_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "_JSON_CHUNK", 7)  # items, numbers and strings cross window edges
    rows = [{"prompt": "x" * (i * 13), "n": 10**i, "ok": True, "none": None} for i in range(12)]
    path = tmp_path / "d.json"
    for indent in (1, None):  # json.dump writes the whole list on one line
        path.write_text(json.dumps(rows, indent=indent))
        assert [rec for _, rec in iter_records(path)] == rows
        broken = '"ok": tru'.join(json.dumps(rows, indent=indent).rsplit('"ok": true', 1))  # in the last row
        with pytest.raises(json.JSONDecodeError) as whole:
            json.loads(broken)
        path.write_text(broken)
        records = iter_records(path)
        assert next(records) == (1, rows[0])  # before the damage near the end is read
        where = f"line {whole.value.lineno} column {whole.value.colno}"  # as if the text were read whole
        with pytest.raises(DataError, match=rf"^d.json {where}: invalid JSON"):
            list(records)


def test_a_json_list_reads_what_json_dump_writes_even_where_yajl_refuses_it(tmp_path):
    rows = [{"prompt": "a", "n": 1}, {"prompt": "b", "x": float("nan"), "big": 10**30, "huge": 1e308 * 10}]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(rows))  # NaN, Infinity and a 100-bit integer: ijson stops, the stdlib reads on
    got = [rec for _, rec in iter_records(path)]
    assert [row for row, _ in iter_records(path)] == [1, 2]
    assert json.dumps(got) == json.dumps(rows)


def test_a_broken_json_list_fails_the_file_naming_the_line_after_the_rows_before_it(tmp_path):
    path = tmp_path / "d.json"
    path.write_text('[\n  {"prompt": "a"},\n  {"prompt": "b",}\n]')
    records = iter_records(path)
    assert next(records) == (1, {"prompt": "a"})
    with pytest.raises(DataError, match=r"^d.json line 3 column 18: invalid JSON: Expecting property name"):
        next(records)
    path.write_text('[{"prompt": "a"}')
    with pytest.raises(DataError, match=r"d.json line 1 column 17: invalid JSON: the list is not closed"):
        list(iter_records(path))


# ---------------------------------------------------------------- CSV


def test_csv_cells_are_text_as_written_and_an_empty_cell_is_null(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b'\xef\xbb\xbfprompt,answer,level\n42,007,1.50\n"two\nlines",True,\n\nhi,NA,3\n')
    assert rows_of(path) == [
        (1, {"prompt": "42", "answer": "007", "level": "1.50"}),
        (2, {"prompt": "two\nlines", "answer": "True", "level": None}),
        (3, {"prompt": "hi", "answer": "NA", "level": "3"}),
    ]


def test_a_csv_row_with_the_wrong_number_of_cells_is_one_bad_row(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("prompt,answer\na,1\nb,2,extra\nc\nd,4\n")
    assert rows_of(path) == [
        (1, {"prompt": "a", "answer": "1"}),
        (2, "d.csv row 2: has 3 cells, header has 2"),
        (3, "d.csv row 3: has 1 cells, header has 2"),
        (4, {"prompt": "d", "answer": "4"}),
    ]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"", r"d.csv: empty CSV \(no header row\)"),
        (b"prompt,answer,prompt\na,1,b\n", r"d.csv: the header names 'prompt' more than once"),
        (b"prompt\na\n\xff\n", r"d.csv line 3: not UTF-8 text"),
    ],
)
def test_a_csv_that_cannot_be_read_fails_as_a_whole(tmp_path, content, error):
    (tmp_path / "d.csv").write_bytes(content)
    with pytest.raises(DataError, match=error):
        list(iter_records(tmp_path / "d.csv"))


# ---------------------------------------------------------------- text encodings

LINES = ['{"prompt": "héllo", "answer": "1"}', '{"prompt": "naïve ☃", "answer": "2"}']


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_utf16_and_utf32_with_a_byte_order_mark_are_decoded_one_row_per_line(tmp_path, codec):
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff", "utf-32-be": b"\x00\x00\xfe\xff"}.get(codec, b"")
    path = tmp_path / "d.jsonl"
    path.write_bytes(bom + "".join(line + "\r\n" for line in LINES).encode(codec))
    assert rows_of(path) == [(1, json.loads(LINES[0])), (2, json.loads(LINES[1]))]
    csv_path = tmp_path / "d.csv"
    csv_path.write_bytes(bom + 'prompt,answer\n"two\nlines",ü\n'.encode(codec))
    assert rows_of(csv_path) == [(1, {"prompt": "two\nlines", "answer": "ü"})]
    json_path = tmp_path / "d.json"
    json_path.write_bytes(bom + json.dumps([json.loads(line) for line in LINES]).encode(codec))
    assert [row for row, _ in rows_of(json_path)] == [1, 2]


@pytest.mark.parametrize(
    ("codec", "looks_like"),
    [
        ("utf-16-le", "UTF-16 LE without a BOM"),
        ("utf-16-be", "UTF-16 BE without a BOM"),
        ("utf-32-le", "UTF-32 LE without a BOM"),
        ("utf-32-be", "UTF-32 BE without a BOM"),
    ],
)
def test_utf16_and_utf32_without_a_mark_fail_the_file_naming_the_encoding(tmp_path, codec, looks_like):
    for name in ("d.jsonl", "d.csv"):
        (tmp_path / name).write_bytes("\n".join(LINES).encode(codec))
        with pytest.raises(DataError) as caught:
            list(iter_records(tmp_path / name))
        assert str(caught.value).startswith(f"{name}: not UTF-8 text: looks like {looks_like} (byte ")
        assert "line 1)" in str(caught.value)


def test_random_bytes_fail_the_file_as_binary_data_at_once(tmp_path):
    import random

    path = tmp_path / "random.jsonl"
    path.write_bytes(b'{"prompt": "a"}\n' + random.Random(0).randbytes(1 << 20))
    with pytest.raises(DataError, match=r"^random.jsonl: not UTF-8 text: looks like binary data \(byte \d+, line "):
        next(iter_records(path))  # before the first row: the file's head shows it


def test_latin1_lines_are_bad_rows_that_say_what_they_look_like(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"prompt": "plain"}\n{"prompt": "caf\xe9"}\n')
    (_, good), (_, bad) = iter_records(path)
    assert good == {"prompt": "plain"}
    assert str(bad) == (
        "d.jsonl line 2: not UTF-8 text (invalid continuation byte at byte 15; looks like Latin-1/Windows-1252)"
    )
    (tmp_path / "d.csv").write_bytes(b"prompt\ncaf\xe9\n")
    with pytest.raises(DataError, match=r"^d.csv line 2: not UTF-8 text \(.* looks like Latin-1/Windows-1252\)$"):
        list(iter_records(tmp_path / "d.csv"))


def test_a_utf16_file_broken_half_way_fails_naming_the_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(
        b"\xff\xfe" + "".join(x + "\n" for x in LINES).encode("utf-16-le") + b"\x00\xd8"
    )  # a lone surrogate
    with pytest.raises(DataError, match=r"^d.jsonl line 3: not valid UTF-16 LE text"):
        list(iter_records(path))


# ---------------------------------------------------------------- Parquet


def test_parquet_is_read_one_row_group_at_a_time(tmp_path):
    path = tmp_path / "d.parquet"
    rows = [{"prompt": f"q{i}", "answer": str(i), "meta": [("k", i)]} for i in range(30)]
    schema = pa.schema([("prompt", pa.string()), ("answer", pa.string()), ("meta", pa.map_(pa.string(), pa.int64()))])
    pq.write_table(pa.Table.from_pylist(rows, schema), path, row_group_size=10, compression="none")
    assert rows_of(path) == list(enumerate(rows, start=1))  # a Spark-style map column too
    # Damage the last row group: the rows before it come, then the file fails saying where.
    column = pq.ParquetFile(path).metadata.row_group(2).column(0)
    start = column.dictionary_page_offset or column.data_page_offset
    damaged = bytearray(path.read_bytes())
    damaged[start : start + 16] = b"\xff" * 16
    path.write_bytes(bytes(damaged))
    got = []
    with pytest.raises(DataError, match=r"^d.parquet: cannot read after row 20: "):
        got.extend(iter_records(path))
    assert [rec["prompt"] for _, rec in got] == [f"q{i}" for i in range(20)]


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    (tmp_path / "d.parquet").write_text("not parquet")
    with pytest.raises(DataError, match=r"d.parquet: not a Parquet file"):
        list(iter_records(tmp_path / "d.parquet"))


# ---------------------------------------------------------------- Hugging Face folders


def test_a_saved_dataset_dict_is_read_from_its_arrow_shards_in_order(tmp_path):
    from datasets import Dataset, DatasetDict

    rows = [{"prompt": f"q{i}", "answer": i} for i in range(9)]
    DatasetDict({"train": Dataset.from_list(rows), "test": Dataset.from_list(rows[:2])}).save_to_disk(
        tmp_path / "ds", num_shards={"train": 3, "test": 1}
    )
    assert rows_of(tmp_path / "ds") == list(enumerate(rows, start=1))
    assert rows_of(tmp_path / "ds", split="test") == list(enumerate(rows[:2], start=1))
    with pytest.raises(DataError, match=r"^ds: no split 'validation'; available splits: train, test$"):
        iter_records(tmp_path / "ds", split="validation")
    Dataset.from_list(rows[:3]).save_to_disk(tmp_path / "one")  # one Dataset: it is the split asked for
    assert [row for row, _ in iter_records(tmp_path / "one", split="test")] == [1, 2, 3]


def test_a_folder_of_data_files_is_split_by_file_and_folder_names(tmp_path):
    folder = tmp_path / "files"
    (folder / "data").mkdir(parents=True)
    (folder / ".cache").mkdir()
    (folder / "data" / "train-00000-of-00002.jsonl").write_text('{"prompt": "a"}\n{"prompt": }\n')
    (folder / "data" / "train-00001-of-00002.csv").write_text("prompt\nb\nc\n")
    (folder / "dev.jsonl").write_text('{"prompt": "d"}\n')
    (folder / ".cache" / "train.jsonl").write_text('{"prompt": "cached"}\n')
    (folder / "notes.jsonl").write_text('{"prompt": "not a split"}\n')
    assert rows_of(folder) == [
        (1, {"prompt": "a"}),
        (2, "files/data/train-00000-of-00002.jsonl line 2: invalid JSON: Expecting value (column 12)"),
        (3, {"prompt": "b"}),
        (4, {"prompt": "c"}),
    ]
    assert rows_of(folder, split="validation") == rows_of(folder, split="dev") == [(1, {"prompt": "d"})]
    with pytest.raises(DataError, match=r"^files: no split 'test'; available splits: train, validation$"):
        iter_records(folder, split="test")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "questions.jsonl").write_text('{"prompt": "e"}\n')  # no split named: all is train
    assert rows_of(tmp_path / "plain") == [(1, {"prompt": "e"})]


def test_a_folder_reads_only_data_files_never_a_models_config_or_tokenizer(tmp_path):
    folder = tmp_path / "project"
    model = folder / "tiny-model"
    model.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "generation_config.json", "model.safetensors.index.json"):
        (model / name).write_text('{"vocab_size": 64}\n')
    (model / "model.safetensors").write_bytes(b"\x00" * 16)
    (model / "notes.jsonl").write_text('{"prompt": "a model folder holds no rows"}\n')
    (folder / "special_tokens_map.json").write_text('{"eos_token": "</s>"}\n')
    (folder / "README.md").write_text("# questions\n")
    (folder / "questions.jsonl").write_text('{"prompt": "q"}\n')
    assert rows_of(folder) == [(1, {"prompt": "q"})]
    (folder / "questions.jsonl").unlink()
    with pytest.raises(DataError) as caught:
        iter_records(folder)
    assert str(caught.value) == (
        "project: no data files in the folder (looked for .jsonl, .json, .ndjson, .csv, .parquet, .arrow); "
        "tiny-model holds a model, not rows"
    )
    with pytest.raises(DataError, match=r"^tiny-model: no data files .*; the folder holds a model, not rows$"):
        iter_records(model)
    assert rows_of(model / "notes.jsonl") == [(1, {"prompt": "a model folder holds no rows"})]  # a chosen file


# ---------------------------------------------------------------- the run's side


def test_the_run_stops_at_the_first_bad_row_and_reads_no_further_than_its_limit(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS) + "{oops\n")
    assert [r.prompt for r in load_rows(DataSpec(path=str(path), limit=5))] == [r["prompt"] for r in ROWS]
    with pytest.raises(RowError, match=r"^d.jsonl line 6: invalid JSON"):
        load_rows(DataSpec(path=str(path)))
    with pytest.raises(RowError, match=r"^d.jsonl line 6: invalid JSON"):
        read_records(path)


def test_reading_needs_neither_torch_nor_the_datasets_library(tmp_path):
    (tmp_path / "d.csv").write_text("prompt,answer\na,1\n")
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "d.parquet")
    (tmp_path / "hf" / "train").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "hf" / "train" / "part-0.parquet")
    code = (
        "import sys; from trainers.data.readers import read_records\n"
        f"for name in ('d.csv', 'd.parquet', 'hf'): read_records({str(tmp_path)!r} + '/' + name)\n"
        "print(sorted(m for m in ('torch', 'datasets', 'django') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
