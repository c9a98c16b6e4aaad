"""What a model's turn and a tool's result hand the environments is bounded where it enters, through
the real tools and procedural kinds: deep JSON, long integers, lone surrogates and tools returning
something else than text become the call's error (the episode goes on, the next call works), and
a final turn of repeated answer tags is checked in linear time."""

import json
import time
from typing import Any, ClassVar

import pytest

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.catalog import ToolParams
from trainers.rollout.environments.kinds import ENVIRONMENTS
from trainers.rollout.environments.tool_calls import parse_tool_calls
from trainers.rollout.environments.tools.base import FunctionTool

LIMITS = EpisodeLimits(max_observation_chars=200)
ROW = {"messages": [{"role": "user", "content": "What is 6 * 7?"}]}
GOOD = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'
DEEP = "[" * 100_000 + "]" * 100_000


class OddParams(ToolParams):
    offers: ClassVar[str] = "odd"


class Odd(FunctionTool):
    """Returns what its argument names: a list, a str subclass, a lone surrogate, or text."""

    name, description = "odd", "Returns odd things."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"what": {"type": "string"}}}
    params_model = OddParams

    def run(self, arguments):
        class Lying(str):
            def __str__(self):
                raise AssertionError("the subclass's __str__ was called")

        return {
            "list": ["not", "text"],
            "subclass": Lying("z" * 1000),
            "surrogate": "bad \udc80 byte",
        }.get(arguments.get("what"), "fine")


@pytest.fixture
def env():
    environment = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "calculator"}], "answer": "answer_tag"}, LIMITS)
    odd = Odd(
        OddParams(), LIMITS
    )  # offered beside the calculator (not registered: the catalogue stays the built-in one)
    environment.tools.append(odd)
    environment.by_name["odd"] = odd
    environment.reset(ROW)
    yield environment
    environment.close()


@pytest.mark.parametrize(
    ("turn", "error"),
    [
        (f'<tool_call>{{"name": "calculator", "arguments": {{"expression": {DEEP}}}}}</tool_call>',
         "malformed tool call: nested deeper than 32 levels"),
        (f'<tool_call>{{"name": "calculator", "arguments": {{"expression": {"9" * 5000}}}}}</tool_call>',
         "malformed tool call: an integer of more than 100 digits"),
        ('<tool_call>{"name": "calculator", "arguments": {"expression": Infinity}}</tool_call>',
         "malformed tool call: Infinity is not a number JSON allows"),
        ('<tool_call>{"name": "calc\\ud800", "arguments": {}}</tool_call>',
         "unknown tool 'calc\ufffd'; available: calculator, odd"),
        (f'<tool_call>{{"name": "calculator", "arguments": {json.dumps(json.dumps({"expression": [[[[1]]]] * 1}))}}}'
         "</tool_call>", "argument 'expression' must be string, got list"),
    ],
)  # fmt: skip
def test_hostile_calls_become_the_calls_error_and_the_next_call_works(env, turn, error):
    started = time.monotonic()
    result = env.step(turn)
    assert time.monotonic() - started < 2
    [call] = result.tool_calls
    assert call.error == error and result.observation[0]["content"] == f"error: {error}"
    assert not result.done
    json.dumps(result.observation).encode()  # plain text: it can be stored and tokenised
    assert env.step(GOOD).observation[0]["content"] == "42"


def test_a_string_argument_holding_a_lone_surrogate_is_made_text():
    [call] = parse_tool_calls('<tool_call>{"name": "f", "arguments": {"x": "a\\udfffb"}}</tool_call>')
    assert (call.error, call.arguments) == (None, {"x": "a\ufffdb"})


@pytest.mark.parametrize(
    ("what", "result", "error"),
    [
        (
            "list",
            "error: the tool failed: it returned a list, not text",
            "the tool failed: it returned a list, not text",
        ),
        ("subclass", "z" * 166 + "\n[truncated: 834 more characters]", None),  # the note within the 200
        ("surrogate", "bad \ufffd byte", None),
    ],
)
def test_a_tool_returning_something_else_than_text_is_contained(env, what, result, error):
    [call] = env.step(f'<tool_call>{{"name": "odd", "arguments": {{"what": "{what}"}}}}</tool_call>').tool_calls
    assert (call.result, call.error) == (result, error)
    assert type(call.result) is str
    assert (
        env.step('<tool_call>{"name": "odd", "arguments": {"what": "ok"}}</tool_call>').tool_calls[0].result == "fine"
    )


def test_a_final_turn_of_repeated_answer_tags_is_checked_in_linear_time(env):
    started = time.monotonic()
    result = env.step("<answer>" * 200_000)
    assert time.monotonic() - started < 0.5  # the lazy regex took minutes on this
    assert result.done and not result.answered and result.reason == "no tool call and no <answer>"
    fresh = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "calculator"}], "answer": "answer_tag"}, LIMITS)
    fresh.reset(ROW)
    assert fresh.step("<answer>" * 1000 + "42</answer>").answered


def test_a_guess_of_5000_digits_is_answered_and_the_next_guess_works():
    env = ENVIRONMENTS.get("guess_number").create({"difficulty": 2}, LIMITS)
    env.reset({"seed": 3})
    result = env.step("9" * 5000)
    assert not result.done and result.reason == "a guess of 5000 digits"
    assert result.observation[0]["content"] == "999999999999... is not a number from 1 to 20."
    assert env.step("5").reason.startswith("guessed 5: ")
