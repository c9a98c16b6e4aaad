"""An episode laid out as one completion: sampled tokens trained on, observation tokens not."""

from trainers.episodes import Episode, ToolCall, Turn


def _episode() -> Episode:
    return Episode(
        prompt_ids=[1, 2],
        messages=[{"role": "user", "content": "q"}],
        turns=[
            Turn([10, 11], "call", logprobs=[-0.5, -0.25], observation=[{"role": "tool", "content": "r"}],
                 observation_ids=[20, 21, 22], tool_calls=[ToolCall("open", {"box": "a"}, result="r")]),
            Turn([12], "answer", logprobs=[-1.0], answered=True),
        ],
    )  # fmt: skip


def test_layout_marks_sampled_tokens_and_their_turns():
    ep = _episode()
    assert ep.completion_ids == [10, 11, 20, 21, 22, 12]
    assert ep.trained_mask == [1, 1, 0, 0, 0, 1]
    assert ep.turn_index == [0, 0, -1, -1, -1, 1]
    assert ep.engine_logprobs == [-0.5, -0.25, 0.0, 0.0, 0.0, -1.0]
    assert (ep.sampled_tokens, ep.observation_tokens) == (3, 3)
    assert ep.final_text == "answer"


def test_engine_logprobs_are_none_when_a_turn_has_none():
    ep = _episode()
    ep.turns[1].logprobs = None
    assert ep.engine_logprobs is None


def test_transcript_and_turn_dicts_carry_what_the_inspector_shows():
    ep = _episode()
    assert ep.transcript() == [
        {"role": "assistant", "content": "call"},
        {"role": "tool", "content": "r"},
        {"role": "assistant", "content": "answer"},
    ]
    first = ep.turns[0].to_dict()
    assert first["num_tokens"] == 2 and first["observation_tokens"] == 3
    assert first["tool_calls"][0]["name"] == "open" and first["tool_calls"][0]["arguments"] == {"box": "a"}
