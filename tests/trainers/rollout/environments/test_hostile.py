"""The hostile catalogue, applied to everything that runs code in an episode: the python tool,
user tools and python environments. Each misbehaviour becomes an error observation (tools) or
ends the episode with the reason (environments), and the next step still works; nothing reaches
the process running the episodes."""

import json
import textwrap

import pytest

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds import ENVIRONMENTS
from trainers.sandbox.process import _project_root, isolation

LIMITS = EpisodeLimits(tool_timeout_s=1.5, tool_memory_mb=256, max_observation_chars=200)
needs_bubblewrap = pytest.mark.skipif(isolation() != "bubblewrap", reason="bubblewrap cannot run here")
TOKEN = "/tmp/rollout-hostile-home/.cache/huggingface/token"  # planted by the `token` fixture

# name -> (code, what the error says)
HOSTILE = {
    "raises": ("raise ValueError('boom')", "ValueError: boom"),
    "loops": ("while True:\n    pass", "timed out after 1.5 s"),
    "allocates_2gb": ("big = bytearray(2 * 1024 ** 3)", "MemoryError"),
    "exits": ("import os\nos._exit(3)", "the sandbox process died: exited with code 3"),
    "network": ("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)", "Network is unreachable"),
    "reads_home_token": (f"open({TOKEN!r}).read()", "FileNotFoundError"),
    "reads_studio_files": (f"open({_project_root() + '/manage.py'!r}).read()", "FileNotFoundError"),
}
READS = {"reads_home_token", "reads_studio_files"}
CASES = [pytest.param(name, marks=needs_bubblewrap) if name in READS else name for name in HOSTILE]
MEGABYTES = "'x' * 5_000_000"


@pytest.fixture(autouse=True)
def token(monkeypatch, tmp_path):
    """A token this process can read, where HOME says (the sandbox must not show it)."""
    import pathlib

    path = pathlib.Path(TOKEN)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("hf_do_not_leak")
    monkeypatch.setenv("HOME", str(path.parents[2]))
    yield
    assert path.read_text() == "hf_do_not_leak"


def branches(body_of) -> str:
    """`if what == name: <code>` for each hostile entry, then a harmless answer."""
    out = ""
    for name, (code, _) in HOSTILE.items():
        out += f"if what == {name!r}:\n" + textwrap.indent(code, "    ") + "\n"
    out += f"if what == 'megabytes':\n    {body_of(MEGABYTES)}\n"
    return out + f"{body_of(repr('fine'))}\n"


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture
def python_tool():
    env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "python"}], "formats": ["python"]}, LIMITS)
    env.reset({"messages": []})
    yield env
    env.close()


@pytest.mark.parametrize("name", CASES)
def test_the_python_tool_turns_misbehaviour_into_an_observation(python_tool, name):
    code, error = HOSTILE[name]
    result = python_tool.step(f"```python\n{code}\n```")
    [failed] = result.tool_calls
    assert error in failed.error or (name == "network" and "network access is disabled" in failed.error), failed.error
    assert error in result.observation[0]["content"] or name == "network"
    assert not result.done
    assert python_tool.step("```python\nprint(2 + 2)\n```").observation[0]["content"] == "4\n"


def test_the_python_tool_cuts_megabytes_of_output(python_tool):
    [call] = python_tool.step(f"```python\nprint({MEGABYTES})\n```").tool_calls
    # The note counts in the 200 characters: 163 kept of the 5,000,001 printed.
    assert call.truncated and call.result == "x" * 163 + "\n[truncated: 4999838 more characters]"


USER_TOOL = '''
def act(what: str) -> str:
    """Do something.

    Args:
        what: What to do.
    """
''' + textwrap.indent(branches(lambda value: f"return {value}"), "    ")


@pytest.fixture
def user_tools():
    env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "functions", "params": {"code": USER_TOOL}}]}, LIMITS)
    env.reset({"messages": []})
    yield env
    env.close()


@pytest.mark.parametrize("name", [*CASES, "megabytes"])
def test_user_tools_turn_misbehaviour_into_an_observation(user_tools, name):
    [call] = user_tools.step(tool_call("act", what=name)).tool_calls
    if name == "megabytes":
        assert call.error is None and call.result == "x" * 163 + "\n[truncated: 4999837 more characters]"
    else:
        error = HOSTILE[name][1]
        assert error in call.error or (name == "network" and "network access is disabled" in call.error), call.error
    assert user_tools.step(tool_call("act", what="ok")).tool_calls[0].result == "fine"


USER_ENV = (
    "class Env:\n    def reset(self, row):\n        return 'go'\n\n    def step(self, what):\n"
    + textwrap.indent(branches(lambda value: f"return {value}, 0.0, False"), "        ")
)


@pytest.mark.parametrize("name", [*CASES, "megabytes"])
def test_a_python_environment_that_misbehaves_ends_its_episode_and_the_next_one_runs(name):
    env = ENVIRONMENTS.get("python").create({"code": USER_ENV}, LIMITS)
    try:
        env.reset({})
        result = env.step(name)
    finally:
        env.close()
    if name == "megabytes":
        assert not result.done and result.observation[0]["content"].endswith("[truncated: 4999837 more characters]")
    else:
        error = HOSTILE[name][1]
        assert result.done and result.reason.startswith("Env.step() failed: "), result.reason
        assert error in result.reason or (name == "network" and "network access is disabled" in result.reason)
    env = ENVIRONMENTS.get("python").create({"code": USER_ENV}, LIMITS)
    try:
        env.reset({})
        assert env.step("ok").observation == [{"role": "user", "content": "fine"}]
    finally:
        env.close()
