"""The tools kind end to end on text turns (no model): the system message lists the tools, calls
run in order, errors become observations, a turn without a call is the answer."""

import json

import pytest
from pydantic import ValidationError

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds import ENVIRONMENTS

LIMITS = EpisodeLimits(tool_timeout_s=2, tool_memory_mb=256, max_observation_chars=100)
ROW = {"messages": [{"role": "user", "content": "What is 6 * 7?"}], "answer": "42"}


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture
def env():
    params = {"tools": [{"kind": "calculator"}, {"kind": "python"}], "formats": ["hermes", "python"]}
    environment = ENVIRONMENTS.get("tools").create(params, LIMITS)
    yield environment
    environment.close()


def test_reset_puts_the_tool_schemas_in_a_qwen_style_system_message(env):
    start = env.reset(ROW)
    system, user = start.messages
    assert user == ROW["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a helpful assistant.\n\n# Tools\n")
    listed = system["content"].split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(line)["function"]["name"] for line in listed] == ["calculator", "python"]
    assert "```python" in system["content"]


def test_a_rows_own_system_message_is_kept_first():
    env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "calculator"}]}, LIMITS)
    start = env.reset({"messages": [{"role": "system", "content": "Be brief."}, ROW["messages"][0]]})
    assert start.messages[0]["content"].startswith("Be brief.\n\n# Tools")
    assert len(start.messages) == 2


def test_calls_run_in_order_and_the_turn_without_a_call_answers(env):
    start = env.reset(ROW)
    turn = "Let me compute. " + call("calculator", expression="6 * 7") + "\n```python\nx = 6 * 7\nprint(x)\n```"
    result = env.step(turn)
    assert [m["content"] for m in result.observation] == ["42", "42\n"]
    assert [m["role"] for m in result.observation] == ["tool", "tool"]
    assert [(c.name, c.error) for c in result.tool_calls] == [("calculator", None), ("python", None)]
    assert all(c.seconds > 0 for c in result.tool_calls)
    assert (result.done, result.answered, result.reason) == (False, False, "2 tool calls")
    assert result.state != start.state
    final = env.step("The answer is 42.")
    assert (final.done, final.answered, final.observation, final.tool_calls) == (True, True, [], [])
    assert final.state == result.state  # nothing was called: the state did not move


def test_episodes_that_saw_the_same_results_share_a_state():
    states = []
    for expression in ("1 + 1", "1 + 1", "2 + 2"):
        env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "calculator"}]}, LIMITS)
        env.reset(ROW)
        states.append(env.step(call("calculator", expression=expression)).state)
    assert states[0] == states[1] != states[2]


@pytest.mark.parametrize(
    ("turn", "error"),
    [
        ("<tool_call>{not json}</tool_call>", "malformed tool call: not JSON"),
        (call("browser", url="x"), "unknown tool 'browser'; available: calculator, python"),
        (call("calculator", expr="1"), "missing argument: expression"),
        (call("calculator", expression="1 / 0"), "division by zero"),
    ],
)
def test_what_the_model_got_wrong_is_an_observation_and_the_episode_goes_on(env, turn, error):
    env.reset(ROW)
    result = env.step(turn)
    [failed] = result.tool_calls
    assert failed.error.startswith(error), failed.error
    assert result.observation[0]["content"].startswith("error: " + error)
    assert (result.done, result.reason) == (False, "1 tool call, 1 failed")
    assert env.step(call("calculator", expression="2 + 3")).observation[0]["content"] == "5"


def test_long_results_are_cut_with_a_note(env):
    env.reset(ROW)
    [shown] = env.step(call("calculator", expression="2 ** 400")).observation
    digits = str(2**400)  # 121 digits: 67 kept and the note, within the 100 characters
    assert shown["content"] == digits[:67] + "\n[truncated: 54 more characters]" and len(shown["content"]) <= 100


def test_a_turn_may_not_call_without_end():
    env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "calculator"}]}, LIMITS)
    env.reset(ROW)
    result = env.step(call("calculator", expression="1") * 10)
    assert [c.error for c in result.tool_calls[8:]] == ["not run: at most 8 tool calls per turn"] * 2
    assert [c.result for c in result.tool_calls[:8]] == ["1"] * 8


def test_with_answer_tags_a_turn_without_the_tag_ends_unanswered():
    env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "calculator"}], "answer": "answer_tag"}, LIMITS)
    env.reset(ROW)
    assert (env.step("I think 42").answered, env.step("<answer>42</answer>").answered) == (False, True)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"tools": []}, "at least 1 item"),
        ({"tools": [{"kind": "browser"}]}, "unknown tool kind 'browser'"),
        ({"tools": [{"kind": "calculator"}, {"kind": "calculator"}]}, "two tools offer a function named 'calculator'"),
        ({"tools": [{"kind": "calculator"}], "formats": ["python"]}, "runs the python tool"),
        ({"tools": [{"kind": "calculator"}], "tools_prompt": "no list"}, "must contain {tools}"),
        ({"tools": [{"kind": "search", "params": {}}]}, "dataset"),
    ],
)
def test_bad_settings_are_refused_when_saved(params, error):
    with pytest.raises(ValidationError, match=None) as caught:
        ENVIRONMENTS.get("tools").params_model.model_validate(params)
    assert error in str(caught.value), str(caught.value)


def test_a_hermes_turn_stops_at_the_end_of_its_call_and_a_python_only_turn_at_eos():
    from trainers.rollout.environments.base import EpisodeLimits
    from trainers.rollout.environments.kinds.tools import ToolsEnvironment

    calculator = [{"kind": "calculator", "params": {}}]
    hermes = ToolsEnvironment.create({"tools": calculator, "formats": ["hermes"]}, EpisodeLimits())
    assert hermes.stop_strings() == ["</tool_call>"]
    python = [{"kind": "python", "params": {}}]
    fenced = ToolsEnvironment.create({"tools": python, "formats": ["python"]}, EpisodeLimits())
    assert fenced.stop_strings() == []
