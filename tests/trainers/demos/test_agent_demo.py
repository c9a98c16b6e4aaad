"""The agent demo's pieces: held-out names, warm-up transcripts, the spec."""

from trainers.demos.agent_demo import (
    HELD_OUT_BOXES,
    TRAIN_BOXES,
    agent_demo_spec,
    make_agent_dataset,
    warm_up_transcripts,
)
from trainers.rollout.environments.kinds.procedural import lookup_call
from trainers.rollout.environments.tool_calls import parse_tool_calls, well_formed
from trainers.spec import RunSpec


def test_held_out_names_are_new_pairings_of_letters_and_digits_seen_in_training():
    assert not set(HELD_OUT_BOXES) & set(TRAIN_BOXES)
    assert len(HELD_OUT_BOXES) == 52 and len(TRAIN_BOXES) == 208
    assert {b[0] for b in HELD_OUT_BOXES} <= {b[0] for b in TRAIN_BOXES}
    assert {b[1] for b in HELD_OUT_BOXES} <= {b[1] for b in TRAIN_BOXES}


def test_the_warm_up_mixes_tool_use_guesses_and_malformed_calls():
    transcripts = warm_up_transcripts(400, seed=3)
    kinds = {"tool": 0, "guess": 0, "malformed": 0}
    for messages in transcripts:
        box = messages[0]["content"].split('"')[1]
        assert box in TRAIN_BOXES
        if len(messages) == 2:
            kinds["guess"] += 1
            continue
        user, call, tool, answer = messages
        assert tool["role"] == "tool" and answer["role"] == "assistant"
        if call["content"] == lookup_call(box):
            kinds["tool"] += 1
            assert answer["content"] == tool["content"]  # the code, copied
        else:
            kinds["malformed"] += 1
            assert not well_formed(parse_tool_calls(call["content"]))
            assert tool["content"].startswith("error: malformed tool call")
    assert (
        0.3 < kinds["tool"] / 400 < 0.5
        and 0.25 < kinds["guess"] / 400 < 0.45
        and 0.15 < kinds["malformed"] / 400 < 0.35
    )


def test_the_demo_spec_validates_with_the_lookup_environment(tmp_path):
    spec = RunSpec.model_validate(agent_demo_spec("/models/tiny", make_agent_dataset(tmp_path / "b.jsonl"), tmp_path / "out"))
    assert spec.environment.kind == "lookup" and spec.environment.params["instructions"] is False
    assert (tmp_path / "b.jsonl").read_text().count("\n") == len(TRAIN_BOXES)
