"""The playground's "use the run's tools" on the model server's side (workers.serving.agent_tools):
the run's tools environment opens the episode as training does, runs a turn's calls with the
environment's own parser and tools, bounds each result as training does, and refuses what is not a
tools environment (the model server answers that 400)."""

from __future__ import annotations

import pytest

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds.tools import ToolsEnvironment
from workers.serving import agent_tools

PARAMS = {"tools": [{"kind": "calculator"}], "formats": ["hermes"]}
SECTION = {"kind": "tools", "params": PARAMS, "max_turns": 3, "max_turn_tokens": 64}
QUESTION = [{"role": "user", "content": "What is 2+2?"}]


def _call(expression: str) -> str:
    return f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{expression}"}}}}</tool_call>'


def test_start_opens_the_episode_as_the_environment_does():
    start = agent_tools.start({"environment": SECTION, "messages": QUESTION})
    expected = ToolsEnvironment.create(PARAMS, EpisodeLimits()).reset({"messages": QUESTION}).messages
    assert start["messages"] == expected
    assert start["stop"] == ["</tool_call>"]
    assert (start["max_turns"], start["max_turn_tokens"]) == (3, 64)


def test_a_turn_with_a_call_runs_it_and_a_turn_without_one_is_the_answer():
    stepped = agent_tools.step({"environment": SECTION, "text": _call("2+2")})
    assert stepped["calls"] == [{"name": "calculator", "arguments": {"expression": "2+2"}, "result": "4",
                                 "error": None, "truncated": False}]  # fmt: skip
    assert stepped["observation"] == [{"role": "tool", "name": "calculator", "content": "4"}]
    assert stepped["done"] is False
    assert agent_tools.step({"environment": SECTION, "text": "4"})["done"] is True


def test_a_bad_call_is_the_calls_error_and_results_are_cut_as_in_training():
    unknown = agent_tools.step({"environment": SECTION, "text": '<tool_call>{"name": "shell"}</tool_call>'})
    assert unknown["calls"][0]["error"].startswith("unknown tool 'shell'")
    long = agent_tools.step({"environment": {**SECTION, "max_observation_chars": 16}, "text": _call("2**200")})
    call = long["calls"][0]
    assert call["truncated"] is True and len(call["result"]) < len(str(2**200)), call


@pytest.mark.parametrize(
    ("body", "words"),
    [({"environment": {"kind": "lookup", "params": {}}, "text": "x"}, "no tools"),
     ({"environment": {"kind": "nope"}, "text": "x"}, "unknown environment kind"),
     ({"environment": SECTION, "text": 3}, "text:"),
     ([SECTION], "body:")],
)  # fmt: skip
def test_what_is_not_a_tools_turn_is_refused_saying_why(body, words):
    with pytest.raises(ValueError, match=words):
        agent_tools.step(body)
