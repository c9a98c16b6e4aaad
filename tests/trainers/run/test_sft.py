"""The supervised warm-up: what is trained on, and that it learns."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.run.sft import assistant_segments, encode_example, warm_start

CONVERSATION = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "call"},
    {"role": "tool", "content": "42"},
    {"role": "assistant", "content": "42"},
]


def test_only_assistant_turns_and_their_end_marker_are_trained(tiny_tokenizer):
    assert assistant_segments(tiny_tokenizer, CONVERSATION) == [
        ("<|user|>hi<|eos|><|assistant|>", False),
        ("call<|eos|>", True),
        ("<|tool|>42<|eos|><|assistant|>", False),
        ("42<|eos|>", True),
    ]
    ids, mask = encode_example(tiny_tokenizer, CONVERSATION)
    trained = tiny_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert trained == "call<|eos|>42<|eos|>"


def test_a_conversation_without_an_assistant_turn_is_refused(tiny_tokenizer):
    with pytest.raises(ValueError, match="no assistant message"):
        encode_example(tiny_tokenizer, CONVERSATION[:1])


def test_warm_start_learns_the_assistant_replies(tiny_model_path, tiny_tokenizer, tmp_path):
    torch.set_num_threads(1)
    examples = [[{"role": "user", "content": f"copy {w}"}, {"role": "assistant", "content": w}] for w in ("yes", "no")]
    out = warm_start(tiny_model_path, examples, tmp_path / "warm", steps=40, lr=3e-3, seed=0, batch_size=4)

    def loss(path):
        model = AutoModelForCausalLM.from_pretrained(path)
        ids, mask = encode_example(tiny_tokenizer, examples[0])
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
        nll = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="none")
        return (nll * torch.tensor(mask[1:])).sum().item() / sum(mask[1:])

    before, after = loss(tiny_model_path), loss(out)
    assert after < before / 4, (before, after)
    assert (out / "tokenizer.json").exists()


# ------------------------------------------------------------------ a run's cold start (spec.warm_up)

SHARED = {"role": "system", "content": "Tools: calculator. Call it as <tool_call>{...}</tool_call>, then answer."}


def warm_up_file(path, rows=None):
    import json

    rows = rows if rows is not None else [
        {"messages": [SHARED, {"role": "user", "content": f"copy {w}"}, {"role": "assistant", "content": w}]}
        for w in ("yes", "no", "maybe")
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def warm_spec(model_path, tmp_path, **warm_up):
    from trainers.demos.demo import demo_spec, make_demo_dataset
    from trainers.spec import RunSpec

    data = make_demo_dataset(tmp_path / "letters.jsonl")
    config = demo_spec(model_path, data, tmp_path / "out", optim={"total_steps": 1, "prompts_per_step": 2},
                       algorithm={"group_size": 2}, rollout={"max_new_tokens": 4})  # fmt: skip
    config["warm_up"] = {"path": str(warm_up_file(tmp_path / "warm.jsonl")), "steps": 3, "batch_size": 2, **warm_up}
    return RunSpec.model_validate(config)


def test_a_cold_start_with_a_shared_prefix_learns_as_the_plain_loop_does(tiny_model_path, tiny_tokenizer, tmp_path):
    """`cold_start` runs the prefix every example shares (here the system message) as a cache; the replies
    are learnt, and the marker records the settings and the losses."""
    import json

    from trainers.run.sft import COLD_START_MARKER, cold_start, shared_prefix_length

    torch.set_num_threads(1)
    examples = [[SHARED, {"role": "user", "content": f"copy {w}"}, {"role": "assistant", "content": w}]
                for w in ("yes", "no")]  # fmt: skip
    encoded = [encode_example(tiny_tokenizer, m) for m in examples]
    assert shared_prefix_length(encoded) > 10
    out = cold_start(tiny_model_path, examples, tmp_path / "cold", steps=40, lr=3e-3, batch_size=4, device="cpu")
    record = json.loads((out / COLD_START_MARKER).read_text())
    assert record["steps"] == 40 and len(record["losses"]) == 40 and record["shared_prefix_tokens"] > 10
    assert record["losses"][-1] < record["losses"][0] / 4, record["losses"]


def test_a_run_with_warm_up_starts_rl_from_the_cold_started_model_and_a_resumed_one_reuses_it(tiny_model_path, tmp_path):
    from trainers.report import MemoryReporter
    from trainers.run.loop import train
    from trainers.run.sft import COLD_START_MARKER, WARM_UP_DIR, warmed

    torch.set_num_threads(1)
    spec = warm_spec(tiny_model_path, tmp_path)
    reporter = MemoryReporter()
    assert train(spec, reporter).status == "succeeded"
    folder = tmp_path / "out" / WARM_UP_DIR
    assert (folder / COLD_START_MARKER).is_file()
    assert any(line.startswith("cold start: 3 steps of 2 conversations (of 3 in warm.jsonl)") for line in reporter.lines)
    assert any(line.startswith("cold start: done in") for line in reporter.lines), reporter.lines
    assert len(reporter.rollout_batches) == 1  # then RL: one step

    base = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
    warm = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    assert any(not torch.equal(base[k], warm[k].to(base[k].dtype)) for k in base)

    again = MemoryReporter()  # the same settings (a resumed run): the folder is reused
    assert warmed(spec, again).model.path == str(folder)
    assert again.lines == [f"cold start: reusing the model in {folder}"]
    other = MemoryReporter()  # other settings: made again
    assert warmed(warm_spec(tiny_model_path, tmp_path, steps=2), other).model.path == str(folder)
    assert other.lines[0].startswith("cold start: 2 steps")
    assert warmed(spec.model_copy(update={"warm_up": None}), MemoryReporter()).model.path == str(tiny_model_path)


def test_a_warm_up_file_without_conversations_is_refused_naming_the_row(tmp_path):
    from trainers.data.readers import DataError
    from trainers.run.sft import conversations
    from trainers.spec import WarmUpSpec

    bad = warm_up_file(tmp_path / "bad.jsonl", [{"messages": [SHARED, {"role": "assistant", "content": "ok"}]},
                                                {"messages": "hello"}])  # fmt: skip
    with pytest.raises(DataError, match="bad.jsonl row 2: field 'messages' must be a list"):
        conversations(WarmUpSpec(path=str(bad)))
    mute = warm_up_file(tmp_path / "mute.jsonl", [{"messages": [{"role": "user", "content": "hi"}]}])
    with pytest.raises(DataError, match="row 1: the conversation has no assistant message"):
        conversations(WarmUpSpec(path=str(mute)))


def test_the_spec_refuses_a_warm_up_over_several_processes(tmp_path):
    from pydantic import ValidationError

    from trainers.spec import RunSpec, validation_errors

    config = warm_spec("./m", tmp_path).model_dump()
    config["parallel"] = {"procs_per_node": 2}
    with pytest.raises(ValidationError) as exc:
        RunSpec.model_validate(config)
    assert "runs in one process" in validation_errors(exc.value)["warm_up.path"]
