"""The web process's half of "use the run's tools" (studio.serving.agent): which runs offer it, and a
turn's text given back to the environment as the model wrote it (the engine drops the stop string)."""

from __future__ import annotations

from studio.serving import agent

TOOLS = {"kind": "tools", "params": {"tools": [{"kind": "calculator"}, {"kind": "python"}]}}


def test_only_a_run_with_a_tools_environment_offers_its_tools():
    assert agent.run_environment({"model": {}, "environment": TOOLS}) == TOOLS
    assert agent.run_environment({"environment": {"kind": "lookup"}}) is None
    assert agent.run_environment({"model": {}}) is None
    assert agent.run_environment(None) is None
    assert agent.tool_names(TOOLS) == ["calculator", "python"]
    assert agent.tool_names(None) == []


def test_an_open_call_gets_back_the_stop_string_the_engine_dropped():
    opened = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}'
    assert agent.closed(opened) == opened + "</tool_call>"
    assert agent.closed(opened + "</tool_call>") == opened + "</tool_call>"
    assert agent.closed("4") == "4"
