"""Tool calls read from a model turn: both formats, in order, and malformed calls named."""

from trainers.rollout.environments.tool_calls import parse_tool_calls, well_formed


def test_hermes_calls_are_read_in_order_with_their_arguments():
    text = (
        'first <tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>\n'
        'then <tool_call>{"name": "search", "arguments": {"query": "boxes"}}</tool_call>'
    )
    calls = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in calls] == [
        ("calculator", {"expression": "2+3"}),
        ("search", {"query": "boxes"}),
    ]
    assert well_formed(calls)


def test_fenced_python_becomes_a_python_call_and_mixes_with_hermes_by_position():
    text = '```python\nx = 1\nprint(x)\n```\n<tool_call>{"name": "calculator", "arguments": {}}</tool_call>'
    calls = parse_tool_calls(text)
    assert [c.name for c in calls] == ["python", "calculator"]
    assert calls[0].arguments == {"code": "x = 1\nprint(x)\n"}


def test_only_the_formats_asked_for_are_read():
    text = '```python\nprint(1)\n```<tool_call>{"name": "calculator", "arguments": {}}</tool_call>'
    assert [c.name for c in parse_tool_calls(text, formats=("hermes",))] == ["calculator"]
    assert [c.name for c in parse_tool_calls(text, formats=("python",))] == ["python"]


def test_arguments_sent_as_a_json_string_are_decoded():
    calls = parse_tool_calls('<tool_call>{"name": "open", "arguments": "{\\"box\\": \\"red\\"}"}</tool_call>')
    assert calls[0].arguments == {"box": "red"} and calls[0].error is None


def test_an_unclosed_call_at_the_end_of_the_turn_is_read_to_the_end():
    calls = parse_tool_calls('<tool_call>{"name": "open", "arguments": {"box": "red"}}')
    assert calls[0].name == "open" and calls[0].error is None


def test_malformed_calls_say_what_is_wrong_and_are_not_well_formed():
    bad_json, no_name, bad_args = parse_tool_calls(
        "<tool_call>{name: open}</tool_call>"
        '<tool_call>{"arguments": {}}</tool_call>'
        '<tool_call>{"name": "open", "arguments": [1]}</tool_call>'
    )
    assert bad_json.error.startswith("malformed tool call: not JSON")
    assert "expected" in no_name.error
    assert bad_args.error == "malformed tool call: arguments must be an object"
    assert not well_formed([bad_json])
    assert not well_formed([])


def test_a_turn_without_calls_has_none():
    assert parse_tool_calls("The code is 42.") == []
