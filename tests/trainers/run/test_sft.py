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
