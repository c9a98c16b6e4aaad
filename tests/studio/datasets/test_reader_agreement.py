"""A row the studio accepts is a row the run accepts, and the reverse: the same files through the
studio's check (`inspect_dataset`) and the run's load (`load_rows`) give the same verdict, the same
first bad row with the same field and reason, and the same values. No database is touched."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from studio.datasets.files import DatasetFileError, Inspection, detect_format, inspect_dataset
from trainers.data.prompts import load_rows
from trainers.data.readers import DataError, RowError
from trainers.data.rows import PromptRow
from trainers.spec import DataSpec

CHAT = [
    {"messages": [{"role": "user", "content": "hi"}], "answer": "1"},
    {"messages": [{"role": "robot", "content": "beep"}], "answer": "2"},  # not a chat role
    {"messages": [{"role": "user", "content": [{"type": "image", "url": "x.png"}]}], "answer": "3"},  # not text
    {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "ok"}], "answer": "4"},
]


def both_sides(path: Path, split: str = "train", **mapping) -> tuple[Inspection, list[PromptRow]]:
    """The studio's report and the run's rows for one file, after checking that they agree."""
    try:
        report = inspect_dataset(path, detect_format(path), split=split, **mapping)
    except DatasetFileError as exc:
        with pytest.raises(DataError) as run:
            load_rows(DataSpec(path=str(path), split=split, **mapping))
        assert str(run.value) == str(exc), "the studio and the run refuse the file for different reasons"
        raise
    try:
        rows = load_rows(DataSpec(path=str(path), split=split, **mapping))
    except DataError as exc:
        assert report.error_count, f"the studio accepts every row of {path.name}, the run fails: {exc}"
        first = report.errors[0]
        assert re.search(rf"\b(row|line) {first['row']}\b", str(exc)), (first, str(exc))
        assert isinstance(exc, RowError) and (exc.field, exc.reason) == (first["field"], first["message"])
        return report, []
    assert not report.error_count, f"the run accepts every row of {path.name}, the studio reports {report.errors}"
    assert len(rows) == report.row_count
    for shown, row in zip(report.preview, rows, strict=False):  # what the studio shows is what the run gets
        assert row.prompt == shown[mapping.get("messages_field") or mapping["prompt_field"]]
        if mapping.get("answer_field"):
            assert row.fields["answer"] == shown[mapping["answer_field"]]
        for key in mapping.get("extra_fields", ()):
            assert row.fields[key] == shown[key]
    return report, rows


def errors(report: Inspection) -> list[tuple[int, str | None]]:
    return [(e["row"], e["field"]) for e in report.errors]


QA = {"prompt_field": "question", "answer_field": "answer"}


def test_csv_numbers_are_text_on_both_sides(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text("question,answer,level\nWhat is 5+2?,007,1\nWhat is 2+2?,4,2\n")
    _, rows = both_sides(path, **QA, extra_fields=["level"])
    assert rows[0].fields == {"answer": "007", "level": "1"}  # typed, the answer would be 7


def test_a_csv_prompt_that_looks_like_a_number_is_a_prompt_on_both_sides(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text("question,answer\n12,1\n7,2\n")
    _, rows = both_sides(path, **QA)
    assert [r.prompt for r in rows] == ["12", "7"]


def test_an_empty_csv_cell_is_no_answer_on_both_sides(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text("question,answer\nq1,1\nq2,\n")
    report, _ = both_sides(path, **QA)
    assert report.errors == [{"row": 2, "field": "answer", "message": "missing"}]


def test_a_json_file_holding_a_list_is_read_the_same(tmp_path):
    path = tmp_path / "qa.json"
    path.write_text(json.dumps([{"question": "a", "answer": 1}, {"question": "b", "answer": "2"}], indent=2))
    _, rows = both_sides(path, **QA)
    assert [r.fields["answer"] for r in rows] == [1, "2"]


def test_chat_messages_with_an_unknown_role_or_non_text_content_are_refused_on_both_sides(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT, indent=2))
    report, _ = both_sides(path, messages_field="messages", answer_field="answer")
    assert errors(report) == [(2, "messages[0]"), (3, "messages[0]")]
    assert "role must be one of" in report.errors[0]["message"]
    path.write_text(json.dumps([CHAT[0], CHAT[3]], indent=2))
    _, rows = both_sides(path, messages_field="messages", answer_field="answer")
    assert rows[1].prompt == CHAT[3]["messages"]


def test_a_bad_json_line_is_the_same_row_on_both_sides(tmp_path):
    path = tmp_path / "qa.jsonl"
    good = json.dumps({"question": "a", "answer": "1"}).encode()
    path.write_bytes(good + b"\n\n" + b'{"question": "b", "answer": }\n' + good + b"\n" + b"\xff\xfe\n")
    report, _ = both_sides(path, **QA)
    assert errors(report) == [(3, None), (5, None)]  # line numbers: the blank line 2 counts
    path.write_bytes(good + b"\n\xff\xfe\n")  # not UTF-8: a bad row, not a crash of the run
    report, _ = both_sides(path, **QA)
    assert errors(report) == [(2, None)]
    assert report.errors[0]["message"].startswith("not UTF-8 text")


def test_parquet_with_chat_messages_and_a_spark_map_column(tmp_path):
    schema = pa.schema(
        [
            ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("answer", pa.int64()),
            ("meta", pa.map_(pa.string(), pa.string())),
        ]
    )
    rows = [
        {"messages": [{"role": "user", "content": "hi"}], "answer": 1, "meta": [("src", "a")]},
        {"messages": [{"role": "robot", "content": "x"}], "answer": 2, "meta": []},
        {"messages": [{"role": "user", "content": None}], "answer": 3, "meta": [("src", "c")]},
    ]
    path = tmp_path / "chat.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema), path, row_group_size=2)
    report, _ = both_sides(path, messages_field="messages", answer_field="answer")
    assert errors(report) == [(2, "messages[0]"), (3, "messages[0]")]
    pq.write_table(pa.Table.from_pylist(rows[:1], schema), path)
    _, mapped = both_sides(path, messages_field="messages", answer_field="answer")
    assert mapped[0].fields == {"answer": 1}


def test_a_saved_hugging_face_dataset_and_a_split_it_does_not_have(tmp_path):
    from datasets import Dataset, DatasetDict

    train = [{"question": f"q{i}", "answer": i} for i in range(3)]
    DatasetDict(
        {"train": Dataset.from_list(train), "test": Dataset.from_list([{"question": "", "answer": 9}])}
    ).save_to_disk(tmp_path / "ds")
    _, rows = both_sides(tmp_path / "ds", **QA)
    assert [r.fields["answer"] for r in rows] == [0, 1, 2]
    report, _ = both_sides(tmp_path / "ds", split="test", **QA)
    assert errors(report) == [(1, "question")]
    with pytest.raises(DataError, match=r"^ds: no split 'validation'; available splits: train, test$"):
        both_sides(tmp_path / "ds", split="validation", **QA)


def test_a_hugging_face_folder_of_split_files(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "train.jsonl").write_text(
        json.dumps({"question": "a", "answer": "1", "hint": "h"}) + "\n" + json.dumps({"question": "b", "answer": "2"})
    )
    (folder / "test.jsonl").write_text(json.dumps({"question": "c", "answer": "3", "hint": None}))
    report, _ = both_sides(folder, **QA, extra_fields=["hint"])
    assert report.errors == [{"row": 2, "field": "hint", "message": "missing"}]  # not filled in with null
    _, rows = both_sides(folder, split="test", **QA, extra_fields=["hint"])
    assert rows[0].fields == {"answer": "3", "hint": None}
    with pytest.raises(DataError, match=r"^hf: no split 'validation'; available splits: train, test$"):
        both_sides(folder, split="validation", **QA)


def test_a_hugging_face_folder_may_mix_file_formats_and_its_csv_is_text(tmp_path):
    folder = tmp_path / "hf"
    (folder / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"question": "a", "answer": 1}]), folder / "data" / "train-00000.parquet")
    (folder / "data" / "test-00000.csv").write_text("question,answer\nb,007\n")
    _, rows = both_sides(folder, **QA)
    assert rows[0].fields == {"answer": 1}
    _, rows = both_sides(folder, split="test", **QA)
    assert rows[0].fields == {"answer": "007"}
