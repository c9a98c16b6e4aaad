"""What a model process answers is checked before it is relayed (studio.serving.relay): the OpenAI
shape or BadAnswer, rebuilt with the studio's name for the model, nothing else of it passed on."""

from __future__ import annotations

import pytest

from studio.serving.relay import BadAnswer, checked


def answer(**choice):
    return {"id": "x", "model": "/srv/secret/folder", "created": 1, "extra": "<script>",
            "choices": [{"index": 0, "finish_reason": "stop", **choice}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}  # fmt: skip


def test_a_good_answer_is_rebuilt_with_the_studios_name_and_its_own_fields_only():
    out = checked(answer(message={"role": "assistant", "content": "hi", "reasoning": "x"}), "run-1/step-2",
                  "chat.completion")  # fmt: skip
    assert out["model"] == "run-1/step-2" and "extra" not in out
    assert out["choices"] == [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]
    assert out["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


def test_tool_calls_keep_their_shape():
    call = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "1"}'}}
    out = checked(answer(message={"role": "assistant", "content": None, "tool_calls": [call]}), "m", "chat.completion")
    assert out["choices"][0]["message"]["tool_calls"] == [call]


@pytest.mark.parametrize("bad", [
    [], {"choices": "many"}, answer(index="0"), {"choices": [{"index": True, "text": "x"}]},
    answer(text=5), answer(message={"content": {"html": 1}}), answer(finish_reason="exploded", text="x"),
    answer(message={"content": "x", "tool_calls": [{"function": "rm -rf"}]}), {"choices": [{"index": 0}]},
])  # fmt: skip
def test_anything_else_is_refused(bad):
    with pytest.raises(BadAnswer):
        checked(bad, "m", "chat.completion")
