"""The tokens between two turns, rendered by the chat template: the tiny model's and a Qwen-style one."""

import pytest
from transformers import AutoTokenizer

from trainers.rollout.turn_tokens import observation_token_ids

OBSERVATION = [{"role": "tool", "content": "result 7"}]
QWEN_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.fixture
def qwen_style(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.chat_template = QWEN_TEMPLATE
    return tokenizer


def text(tokenizer, ids):
    return tokenizer.decode(ids, skip_special_tokens=False)


def test_after_eos_the_tiny_template_adds_the_tool_message_and_opens_the_next_turn(tiny_tokenizer):
    ids = observation_token_ids(tiny_tokenizer, OBSERVATION, tiny_tokenizer.eos_token_id)
    assert text(tiny_tokenizer, ids) == "<|tool|>result 7<|eos|><|assistant|>"


def test_a_turn_ended_by_a_stop_string_is_closed_first(tiny_tokenizer):
    last = tiny_tokenizer.encode("answer", add_special_tokens=False)[-1]
    ids = observation_token_ids(tiny_tokenizer, OBSERVATION, last)
    assert text(tiny_tokenizer, ids) == "<|eos|><|tool|>result 7<|eos|><|assistant|>"


def test_qwen_style_after_im_end_only_its_newline_is_left_to_close_the_turn(qwen_style):
    im_end = qwen_style.convert_tokens_to_ids("<|im_end|>")
    ids = observation_token_ids(qwen_style, OBSERVATION, im_end)
    assert text(qwen_style, ids) == "\n<|im_start|>tool\nresult 7<|im_end|>\n<|im_start|>assistant\n"


def test_qwen_style_the_whole_context_reads_as_the_template_renders_the_conversation(qwen_style):
    prompt = [{"role": "user", "content": "what is x"}]
    context = qwen_style.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    ids = qwen_style(context, add_special_tokens=False).input_ids
    sampled = qwen_style("<tool_call>x</tool_call>", add_special_tokens=False).input_ids  # stopped on a stop string
    ids += sampled + observation_token_ids(qwen_style, OBSERVATION, sampled[-1])
    conversation = [*prompt, {"role": "assistant", "content": "<tool_call>x</tool_call>"}, *OBSERVATION]
    assert text(qwen_style, ids) == qwen_style.apply_chat_template(
        conversation, add_generation_prompt=True, tokenize=False
    )


def test_without_a_chat_template_messages_are_separated_by_blank_lines(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    tokenizer.chat_template = None
    ids = observation_token_ids(tokenizer, OBSERVATION, None)
    assert tokenizer.decode(ids, skip_special_tokens=True).strip() == "result 7"
