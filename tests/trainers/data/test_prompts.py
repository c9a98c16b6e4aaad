import json

import pytest

from trainers.data.prompts import cut_prompts_warning, load_prompts, load_rows, render_prompt
from trainers.data.readers import DataError
from trainers.data.source import PromptSource
from trainers.spec import DataSpec

ROWS = [{"question": f"What is {i} + 1?", "answer": str(i + 1), "level": i % 3} for i in range(10)]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def spec(path, **kw) -> DataSpec:
    return DataSpec(path=str(path), **{"prompt_field": "question", **kw})


def test_it_reads_jsonl_with_answer_and_extra_fields(tmp_path):
    rows = load_rows(spec(write_jsonl(tmp_path / "d.jsonl", ROWS), extra_fields=["level"]))
    assert len(rows) == 10
    assert rows[3].prompt == "What is 3 + 1?"
    assert rows[3].fields == {"answer": "4", "level": 0}
    assert rows[3].row == 4


def test_it_reads_csv(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("question,answer\n" + "".join(f"{r['question']},{r['answer']}\n" for r in ROWS))
    rows = load_rows(spec(path))
    assert [r.prompt for r in rows] == [r["question"] for r in ROWS]
    assert rows[0].fields["answer"] in ("1", 1)  # CSV columns are typed by the reader


def test_it_reads_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    rows = load_rows(spec(path, limit=4))
    assert [r.fields["answer"] for r in rows] == ["1", "2", "3", "4"]


def test_it_reads_a_saved_dataset_folder_and_picks_the_split(tmp_path):
    from datasets import Dataset, DatasetDict

    DatasetDict({"train": Dataset.from_list(ROWS), "test": Dataset.from_list(ROWS[:2])}).save_to_disk(tmp_path / "ds")
    assert len(load_rows(spec(tmp_path / "ds", split="test"))) == 2
    with pytest.raises(DataError, match=r"no split 'dev'; available splits: train, test"):
        load_rows(spec(tmp_path / "ds", split="dev"))


def test_it_reads_a_folder_of_data_files(tmp_path):
    (tmp_path / "files").mkdir()
    write_jsonl(tmp_path / "files" / "train.jsonl", ROWS)
    assert len(load_rows(spec(tmp_path / "files"))) == 10


def test_a_missing_field_names_the_file_row_and_available_fields(tmp_path):
    rows = [*(ROWS * 2)[:16], {"question": "q"}, *ROWS[:2]]
    with pytest.raises(DataError) as err:
        load_rows(spec(write_jsonl(tmp_path / "data.jsonl", rows)))
    assert str(err.value) == "data.jsonl row 17: field 'answer' is missing; available fields: question"


def test_a_wrong_prompt_field_lists_the_fields_there_are(tmp_path):
    with pytest.raises(
        DataError, match=r"data.jsonl row 1: field 'prompt' is missing; available fields: question, answer, level"
    ):
        load_rows(DataSpec(path=str(write_jsonl(tmp_path / "data.jsonl", ROWS))))


def test_a_malformed_json_line_is_reported_by_number(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n" + '{"question": "x", "answer": }\n')
    with pytest.raises(DataError, match=r"data.jsonl line 3: invalid JSON"):
        load_rows(spec(path))


def test_an_empty_prompt_is_refused(tmp_path):
    with pytest.raises(DataError, match=r"d.jsonl row 2: field 'question' must be non-empty text"):
        load_rows(spec(write_jsonl(tmp_path / "d.jsonl", [ROWS[0], {"question": " ", "answer": "1"}])))


def test_bad_chat_messages_are_refused_with_the_message_index(tmp_path):
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}], "answer": "1"}]
    with pytest.raises(DataError, match=r"row 1: field 'messages' message 1: role must be one of"):
        load_rows(DataSpec(path=str(write_jsonl(tmp_path / "d.jsonl", rows)), messages_field="messages"))


def test_an_unknown_extension_asks_for_a_format(tmp_path):
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(DataError, match=r"d.txt: cannot tell the format"):
        load_rows(spec(tmp_path / "d.txt"))


def test_prompts_use_the_chat_template_and_system_prompt(tmp_path, tiny_tokenizer):
    data = spec(write_jsonl(tmp_path / "d.jsonl", ROWS[:1]), system_prompt="Be brief.")
    (prompt,) = load_prompts(data, tiny_tokenizer)
    assert prompt.text == "<|system|>Be brief.<|eos|><|user|>What is 0 + 1?<|eos|><|assistant|>"
    assert prompt.token_ids == tiny_tokenizer(prompt.text, add_special_tokens=False).input_ids


def test_chat_messages_render_through_the_template(tmp_path, tiny_tokenizer):
    rows = [{"messages": [{"role": "user", "content": "hi"}], "answer": "1"}]
    data = DataSpec(path=str(write_jsonl(tmp_path / "d.jsonl", rows)), messages_field="messages")
    (prompt,) = load_prompts(data, tiny_tokenizer)
    assert prompt.text == "<|user|>hi<|eos|><|assistant|>"
    assert prompt.row.prompt == [{"role": "user", "content": "hi"}]


def test_long_prompts_keep_their_end(tmp_path, tiny_tokenizer):
    rows = [{"question": "word " * 200 + "END", "answer": "1"}]
    data = spec(write_jsonl(tmp_path / "d.jsonl", rows), max_prompt_tokens=16, use_chat_template=False)
    (prompt,) = load_prompts(data, tiny_tokenizer)
    assert len(prompt.token_ids) == 16
    assert tiny_tokenizer.decode(prompt.token_ids).endswith("END")


def test_the_prompt_source_is_seeded_and_resumes_where_it_stopped(tmp_path, tiny_tokenizer):
    prompts = load_prompts(spec(write_jsonl(tmp_path / "d.jsonl", ROWS)), tiny_tokenizer)
    a = PromptSource(prompts, seed=3)
    first = [p.id for p in a.next_batch(7)]
    state = a.state_dict()
    rest = [p.id for p in a.next_batch(8)]  # crosses into epoch 1
    assert sorted(first + rest[:3]) == sorted(p.id for p in prompts)
    assert a.state_dict() == {"epoch": 1, "index": 5}

    b = PromptSource(prompts, seed=3)
    b.load_state_dict(state)
    assert [p.id for p in b.next_batch(8)] == rest
    assert [p.id for p in PromptSource(prompts, seed=3).next_batch(7)] == first
    assert [p.id for p in PromptSource(prompts, seed=4).next_batch(7)] != first


def test_without_shuffle_prompts_come_in_file_order(tmp_path, tiny_tokenizer):
    prompts = load_prompts(spec(write_jsonl(tmp_path / "d.jsonl", ROWS)), tiny_tokenizer)
    assert [p.id for p in PromptSource(prompts, seed=0, shuffle=False).next_batch(12)] == [
        *map(str, range(1, 11)),
        "1",
        "2",
    ]


def test_prompts_cut_to_max_prompt_tokens_are_counted_in_a_warning(tiny_model_path, tmp_path):
    from tests.trainers.helpers import tiny_spec
    from trainers.models.loading import load_tokenizer

    spec = tiny_spec(
        tiny_model_path,
        tmp_path,
        data={"max_prompt_tokens": 8, "system_prompt": "Answer with letters only, please."},
    )
    tokenizer = load_tokenizer(str(tiny_model_path))
    uncut = spec.data.model_copy(update={"max_prompt_tokens": 10_000})
    lengths = [len(render_prompt(row, tokenizer, uncut).token_ids) for row in load_rows(spec.data)]
    assert max(lengths) > 8  # with the system prompt, longer than the cap
    over = [n for n in lengths if n > 8]
    assert cut_prompts_warning(load_prompts(spec.data, tokenizer), tokenizer, spec.data) == (
        f"{len(over)} of {len(lengths)} prompts are longer than data.max_prompt_tokens (8) and are cut to "
        f"their last 8 tokens; the longest has {max(lengths)} tokens"
    )
    default = tiny_spec(tiny_model_path, tmp_path / "b").data
    assert cut_prompts_warning(load_prompts(default, tokenizer), tokenizer, default) is None  # 512: nothing is cut
