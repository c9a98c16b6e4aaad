"""The real-model agent demo (trainers/demos/real_agent.py): its transcripts go through
SmolLM2's ChatML template with the tool messages and parse back to the same calculator calls, the
rubric reads the episode, the spec validates, and a short cold start makes the model call the
calculator on a held-out problem with greedy decoding, through the real environment."""

import json
import time

import pytest

from trainers.demos.real_agent import (
    SYSTEM_PROMPT,
    WARM_BATCH,
    WARM_EXAMPLES,
    WARM_LR,
    WARM_MARKER,
    WARM_STEPS,
    calculator_call,
    make_real_agent_dataset,
    make_warm_up_file,
    real_agent_demo_spec,
    real_agent_environment,
    real_agent_rows,
    real_agent_rubric,
    real_agent_spec,
    warm_real_agent_model,
    warm_up_transcripts,
)
from trainers.report import MemoryReporter
from trainers.rewards.rubric import Rubric
from trainers.rewards.sample import Sample
from trainers.rollout.environments.tool_calls import parse_tool_calls, well_formed
from trainers.rollout.environments.tools.calculator import evaluate as calculate
from trainers.run.sft import assistant_segments, conversations, encode_example, shared_prefix_length
from trainers.spec import RunSpec


def test_rows_are_sums_and_products_the_calculator_answers(tmp_path):
    path = make_real_agent_dataset(tmp_path / "calc.jsonl", count=50, seed=3)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows == real_agent_rows(50, seed=3) and len({r["id"] for r in rows}) == 50
    assert {r["expression"].split()[1] for r in rows} == {"+", "*"}
    for row in rows:
        a, op, b = row["expression"].split()
        assert row["prompt"] == f"What is {a} {op} {b}?"
        assert row["answer"] == str(calculate(row["expression"])) and len(row["answer"]) >= 3


def test_the_spec_validates_with_the_calculator_environment_and_a_validation_holdout(tmp_path):
    data = make_real_agent_dataset(tmp_path / "calc.jsonl")
    spec = RunSpec.model_validate(real_agent_spec("/models/smollm2", data, tmp_path / "out", optim={"total_steps": 5}))
    assert spec.environment.kind == "tools" and spec.optim.total_steps == 5 and spec.optim.lr == 1e-5
    assert [t["kind"] for t in spec.environment.params["tools"]] == ["calculator"]
    assert spec.environment.params["formats"] == ["hermes"]
    assert spec.validation.holdout_fraction > 0
    assert spec.environment.model_dump() == RunSpec.model_validate(spec.model_dump()).environment.model_dump()


def test_the_studio_demo_begins_with_the_cold_start_on_transcripts_of_its_own_environment(tmp_path):
    """The agent demo the studio makes on its first start: the run's warm_up section names the cold
    start's conversations (a JSONL file the studio writes without torch), played through the same
    environment the run uses, so RL starts from a model that calls the calculator."""
    data = make_real_agent_dataset(tmp_path / "calc.jsonl")
    warm = make_warm_up_file(tmp_path / "warm.jsonl")
    spec = RunSpec.model_validate(real_agent_demo_spec("./model", data, warm, tmp_path / "out"))
    w = spec.warm_up
    assert (w.path, w.steps, w.batch_size, w.lr) == (str(warm), WARM_STEPS, WARM_BATCH, WARM_LR)
    examples = conversations(w)
    assert examples == warm_up_transcripts(real_agent_rows(WARM_EXAMPLES, seed=10_000)) and len(examples) == 300
    first = examples[0][0]["content"]
    assert first.startswith(SYSTEM_PROMPT) and '"name": "calculator"' in first


def test_transcripts_render_through_chatml_and_parse_back_to_the_same_calls(real_model_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(real_model_path)
    rows = real_agent_rows(40, seed=7)
    kinds = {"tool": 0, "guess": 0}
    for row, messages in zip(rows, warm_up_transcripts(rows, seed=7), strict=True):
        system, user, *turns = messages
        # The system message: the demo's instruction, then the calculator's JSON schema in <tools>.
        assert system["role"] == "system" and system["content"].startswith(SYSTEM_PROMPT)
        schema = json.loads(system["content"].split("<tools>\n")[1].split("\n</tools>")[0])
        assert schema["function"]["name"] == "calculator"
        assert schema["function"]["parameters"]["required"] == ["expression"]
        assert user == {"role": "user", "content": row["prompt"]}
        text = tokenizer.apply_chat_template(messages, tokenize=False)
        assert text.startswith("<|im_start|>system\n" + SYSTEM_PROMPT)
        trained = [piece for piece, is_trained in assistant_segments(tokenizer, messages) if is_trained]
        if len(turns) == 1:  # a guess: a near miss, never the answer
            kinds["guess"] += 1
            (answer,) = turns
            assert answer["content"] != row["answer"] and len(answer["content"]) == len(row["answer"])
            assert trained == [answer["content"] + "<|im_end|>\n"]
            continue
        kinds["tool"] += 1
        call, tool, answer = turns
        assert call == {"role": "assistant", "content": calculator_call(row["expression"])}
        assert tool == {"role": "tool", "name": "calculator", "content": row["answer"]}  # the tool's real result
        assert answer == {"role": "assistant", "content": row["answer"]}
        assert f"<|im_start|>tool\n{row['answer']}<|im_end|>\n" in text
        assert text.endswith(f"<|im_start|>assistant\n{row['answer']}<|im_end|>\n")
        # What the model is trained to write: the call and the answer, each closed by <|im_end|>...
        assert trained == [call["content"] + "<|im_end|>\n", row["answer"] + "<|im_end|>\n"]
        # ... and the call, decoded from the tokens it is trained on, parses back to the same calculator call.
        ids, mask = encode_example(tokenizer, messages)
        written = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m], skip_special_tokens=True)
        (parsed,) = parse_tool_calls(written, ["hermes"])
        assert well_formed([parsed])
        assert (parsed.name, parsed.arguments) == ("calculator", {"expression": row["expression"]})
    assert kinds["tool"] > kinds["guess"] > 0


def test_the_shared_prefix_stops_before_the_first_trained_token(real_model_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(real_model_path)
    encoded = [encode_example(tokenizer, m) for m in warm_up_transcripts(real_agent_rows(8, seed=1))]
    shared = shared_prefix_length(encoded)
    assert shared > 200  # the system message (tools prompt and schema) is most of each example
    assert all(ids[:shared] == encoded[0][0][:shared] and not any(mask[: shared + 1]) for ids, mask in encoded)


def test_the_rubric_rewards_the_right_number_and_a_calculator_call_that_returned_one():
    def episode(answer, result):
        transcript = [
            {"role": "assistant", "content": calculator_call("347 + 589")},
            {"role": "tool", "name": "calculator", "content": result},
            {"role": "assistant", "content": answer},
        ]
        return Sample(prompt="What is 347 + 589?", completion=answer, fields={"answer": "936"}, transcript=transcript)

    no_tool = Sample(prompt="What is 347 + 589?", completion="936", fields={"answer": "936"}, transcript=[])
    with Rubric.from_spec(real_agent_rubric()) as rubric:
        right, wrong, failed, guessed = rubric.score(
            [
                episode("936", "936"),
                episode("926", "936"),
                episode("936", "error: not an arithmetic expression"),
                no_tool,
            ]
        )
    assert right.reward == pytest.approx(1.0) and right.passed
    assert wrong.reward == pytest.approx(0.2) and not wrong.passed
    assert failed.reward == pytest.approx(0.8) and guessed.reward == pytest.approx(0.8)
    assert all(r.scores["used_calculator"].error is None for r in (right, wrong, failed, guessed))


@pytest.mark.slow
def test_a_short_cold_start_makes_the_model_call_the_calculator_on_a_held_out_problem(
    real_model_path, tmp_path_factory, tmp_path
):
    """Three steps of the cold start on calculator transcripts alone (the demo's warm-up is longer
    and mixes in guesses), then the first greedy turn of a problem it never saw, played by the
    trainer's own evaluation through the tools environment: a calculator call that computes the
    answer, and the tool message with it. (66-195 s measured on 2 cores shared with other jobs.)"""
    import torch

    from trainers.run.evaluate import evaluate

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        out = tmp_path_factory.mktemp("real-agent") / "warm"
        warm = warm_real_agent_model(real_model_path, out, steps=3, batch_size=8, mix={"tool": 1.0}, device="cpu")
        assert warm == out and json.loads((out / WARM_MARKER).read_text())["steps"] == 3
        started = time.perf_counter()
        assert warm_real_agent_model(real_model_path, out) == out  # already warm: returns at once
        assert time.perf_counter() - started < 1

        held_out = make_real_agent_dataset(tmp_path / "held-out.jsonl", count=1, seed=999)
        (row,) = [json.loads(line) for line in held_out.read_text().splitlines()]
        assert row["prompt"] not in {r["prompt"] for r in real_agent_rows(300, seed=10_000)}
        spec = RunSpec.model_validate(
            real_agent_spec(
                warm,
                held_out,
                tmp_path / "eval",
                rollout={"temperature": 0.0},
                eval={"samples_per_prompt": 1, "num_prompts": 1},
                environment={**real_agent_environment(), "max_turns": 1},  # the call and its result
            )
        )
        reporter = MemoryReporter()
        evaluate(spec, reporter)
    finally:
        torch.set_num_threads(before)
    (rollout,) = [r for _, batch in reporter.rollout_batches for r in batch]
    first = rollout.turns[0]
    (call,) = first["tool_calls"]
    assert call["name"] == "calculator" and call["error"] is None, first["text"]
    assert calculate(call["arguments"]["expression"]) == int(row["answer"]), call  # the right expression
    assert first["observation"] == [{"role": "tool", "name": "calculator", "content": row["answer"]}]
