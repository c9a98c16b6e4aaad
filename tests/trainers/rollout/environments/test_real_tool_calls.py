"""Hermes tool calls as SmolLM2-135M-Instruct would write them: its tokens, decoded back as each
engine decodes them, parse to the calls written. Tokenizer only: no weights are loaded."""

import json

import pytest
from tokenizers.decoders import DecodeStream
from transformers import AutoTokenizer

from trainers.data.prompts import encode_chat
from trainers.episodes import ToolCall
from trainers.rollout.environments.tool_calls import parse_tool_calls, well_formed


@pytest.fixture(scope="module")
def tokenizer(real_model_path):
    return AutoTokenizer.from_pretrained(real_model_path)


def hermes(name, arguments, *, compact=False) -> str:
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>{body}</tool_call>" if compact else f"<tool_call>\n{body}\n</tool_call>"


CASES = {
    "calculator": (hermes("calculator", {"expression": "17 * 23"}), [ToolCall("calculator", {"expression": "17 * 23"})]),
    "compact-nested-unicode": (
        hermes("lookup", {"box": "B-7", "note": "café ☕ 東京", "path": [1, 2.5, {"deep": True, "none": None}]},
               compact=True),
        [ToolCall("lookup", {"box": "B-7", "note": "café ☕ 東京", "path": [1, 2.5, {"deep": True, "none": None}]})],
    ),
    "prose-then-two-calls": (
        "Let me compute both.\n" + hermes("calculator", {"expression": "2**10"}) + "\n"
        + hermes("calculator", {"expression": "sqrt(2)"}),
        [ToolCall("calculator", {"expression": "2**10"}), ToolCall("calculator", {"expression": "sqrt(2)"})],
    ),
    "arguments-as-a-json-string": (
        '<tool_call>\n{"name": "calculator", "arguments": "{\\"expression\\": \\"1 + 1\\"}"}\n</tool_call>',
        [ToolCall("calculator", {"expression": "1 + 1"})],
    ),
}  # fmt: skip


def hf_engine_text(tokenizer, ids) -> str:
    """As trainers.rollout.engines.hf decodes a completion."""
    return tokenizer.decode(ids, skip_special_tokens=True)


def vllm_text(tokenizer, prompt_ids, ids) -> str:
    """As vLLM's detokenizer does for a fast tokenizer (vllm/v1/engine/detokenizer.py,
    FastIncrementalDetokenizer, skip_special_tokens=True by default): a DecodeStream primed with the
    prompt, stepped one sampled token at a time."""
    stream = DecodeStream(ids=prompt_ids, skip_special_tokens=True)
    return "".join(stream.step(tokenizer._tokenizer, i) or "" for i in ids)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ended_by", ["stop-string", "eos"])
def test_its_tokens_for_a_hermes_call_decode_and_parse_to_the_call(tokenizer, case, ended_by):
    text, expected = CASES[case]
    # A turn stops on "</tool_call>" (the tools environment's stop string), or the model closes it with EOS.
    ids = tokenizer(text, add_special_tokens=False).input_ids + ([tokenizer.eos_token_id] if ended_by == "eos" else [])
    assert tokenizer.convert_tokens_to_ids("<tool_call>") == tokenizer.unk_token_id  # plain text, never skipped
    prompt = encode_chat(tokenizer, [{"role": "user", "content": "What is 17 * 23?"}])[1]
    for decoded in (hf_engine_text(tokenizer, ids), vllm_text(tokenizer, prompt, ids)):
        assert decoded == text
        calls = parse_tool_calls(decoded, ["hermes"])
        assert calls == expected
        assert well_formed(calls)
