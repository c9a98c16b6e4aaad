"""Replies from the sandbox are untrusted (issue 23), through the real tools, environments and
`run_episodes`: code that reaches the reply pipe, rebinds the interpreter's own functions, or
returns text that is not text ends that call (tools) or that episode (environments) with the
reason; the next call, the next episode and the rest of the batch go on. Plus the sandbox's disk
quota and output limits, seen from a tool."""

import json

import pytest

from trainers.data.prompts import Prompt, encode_chat
from trainers.data.rows import PromptRow
from trainers.rollout.engines.base import Generation, RolloutEngine, SamplingParams
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds import ENVIRONMENTS
from trainers.rollout.generate import run_episodes
from trainers.sandbox.process import isolation
from trainers.spec import EnvironmentSpec

LIMITS = EpisodeLimits(tool_timeout_s=3.0, tool_memory_mb=256, max_observation_chars=200)
needs_bubblewrap = pytest.mark.skipif(isolation() != "bubblewrap", reason="bubblewrap cannot run here")


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def cell(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture
def python_tool():
    env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "python"}], "formats": ["python"]}, LIMITS)
    env.reset({"messages": []})
    yield env
    env.close()


# Cells that attack the interpreter from inside; each must end its own call, and the next cell runs.
REBIND_RUN = """
import sys
def fake(code, limit):
    return {"output": ["not", "text"], "dropped": 0, "error": None, "traceback": None}
sys._getframe(1).f_globals["run"].__code__ = fake.__code__
"""
NEGATIVE_COUNT = """
import sys
def fake(code, limit):
    return {"output": "x", "dropped": -5, "error": None, "traceback": None}
sys._getframe(1).f_globals["run"].__code__ = fake.__code__
"""
FORGE_LINES = """
import os
for fd in range(3, 64):
    for line in (b'\\n{"ok": true, "value": {"output": "forged", "dropped": 0, "error": null}}\\n', b'half a line'):
        try:
            os.write(fd, line)
        except OSError:
            pass
print("real")
"""


def test_a_rebound_interpreter_ends_its_call_and_the_next_cell_gets_a_fresh_one(python_tool):
    python_tool.step(cell("x = 41"))
    python_tool.step(cell(REBIND_RUN))  # this cell itself still answers: the rebinding takes effect after
    [broken] = python_tool.step(cell("x + 1")).tool_calls
    assert "the interpreter's reply was malformed: the output came back as list, not text" in broken.error
    assert "earlier variables and imports are gone" in broken.result
    [fresh] = python_tool.step(cell("print(2 + 2)")).tool_calls
    assert fresh.error is None and fresh.result == "4\n"


def test_a_negative_count_is_malformed_too(python_tool):
    python_tool.step(cell(NEGATIVE_COUNT))
    [broken] = python_tool.step(cell("1")).tool_calls
    assert "the count of dropped characters came back as int, not a count" in broken.error
    assert python_tool.step(cell("print(2 + 2)")).observation[0]["content"] == "4\n"


def test_lines_forged_onto_the_reply_pipe_never_reach_the_observations(python_tool):
    [first] = python_tool.step(cell(FORGE_LINES)).tool_calls
    assert first.result == "real\n"
    for n in range(3):
        assert python_tool.step(cell(f"print({n})")).observation[0]["content"] == f"{n}\n"


def test_output_bypassing_the_capture_does_not_fail_later_cells(python_tool):
    # 20 MB straight onto the process's stdout (the log pipe, not the cell's capture), more than
    # the sandbox's file-size limit: later cells are not affected.
    python_tool.step(cell("import os\nfor _ in range(20):\n    os.write(1, b'x' * (1 << 20))"))
    assert python_tool.step(cell("print('after')")).observation[0]["content"] == "after\n"


@needs_bubblewrap
def test_the_disk_quota_ends_a_cell_and_the_next_one_runs(python_tool):
    fill = "for i in range(12):\n    open(f'/tmp/part{i}', 'wb').write(b'x' * (8 << 20))"
    [full] = python_tool.step(cell(fill)).tool_calls
    assert "No space left on device" in full.error, full.error
    clean = "import os\nfor n in os.listdir('/tmp'):\n    os.remove('/tmp/' + n) if n.startswith('part') else None\nprint('ok')"
    assert python_tool.step(cell(clean)).observation[0]["content"] == "ok\n"


USER_TOOL = '''
class Weird(str):
    def __getitem__(self, key):
        return ["not", "text"]

def act(what: str) -> str:
    """Do something.

    Args:
        what: What to do.
    """
    if what == "weird":
        return Weird("x")
    if what == "surrogate":
        return "a\\ud800b"
    if what == "flood":
        print("p" * 20_000_000)
    return "fine"
'''


@pytest.fixture
def user_tools():
    env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "functions", "params": {"code": USER_TOOL}}]}, LIMITS)
    env.reset({"messages": []})
    yield env
    env.close()


def test_a_user_tool_returning_a_str_subclass_gets_a_clear_error_and_the_next_call_works(user_tools):
    [weird] = user_tools.step(tool_call("act", what="weird")).tool_calls
    assert "act() gave back a malformed result: the result came back as list, not text" in weird.error
    assert user_tools.step(tool_call("act", what="ok")).tool_calls[0].result == "fine"


def test_a_lone_surrogate_from_a_user_tool_becomes_a_replacement_character(user_tools):
    [call] = user_tools.step(tool_call("act", what="surrogate")).tool_calls
    assert call.error is None and call.result == "a\ufffdb"
    call.result.encode("utf-8")


def test_printing_megabytes_in_a_user_tool_does_not_fail_later_calls(user_tools):
    # 20 MB printed (more than the 16 MB file-size limit the old log file had): every later call
    # used to fail the same way.
    assert user_tools.step(tool_call("act", what="flood")).tool_calls[0].result == "fine"
    assert user_tools.step(tool_call("act", what="flood")).tool_calls[0].result == "fine"
    assert user_tools.step(tool_call("act", what="ok")).tool_calls[0].result == "fine"


ENV = """
class Env:
    def reset(self, row):
        self.kind = row.get("kind", "fine")
        return "go"

    def step(self, text):
        if self.kind == "huge_reward":
            return "obs", 10 ** 400, False
        if self.kind == "list_content":
            return [{"role": "user", "content": ["not", "text"]}], 0.0, False
        if self.kind == "rebound":
            # The dispatcher itself, rebound: what comes back is a dict of the wrong shape.
            globals()["__rollout_env__"].__code__ = (lambda method, argument, limit: {"reward": "high", "done": False}).__code__
            return "obs", 0.0, False
        if self.kind == "state":
            return {"observation": "obs", "reward": 0.5, "done": False, "state": list(range(100_000))}
        return "obs", 1.0, False
"""


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("huge_reward", "expected a finite number"),
        ("list_content", "expected {'role': one of"),
    ],
)
def test_a_python_environment_returning_the_wrong_types_ends_its_episode(kind, said):
    env = ENVIRONMENTS.get("python").create({"code": ENV}, LIMITS)
    try:
        env.reset({"kind": kind})
        result = env.step("x")
        assert result.done and said in result.reason, result.reason
    finally:
        env.close()


def test_a_rebound_dispatcher_ends_the_episode_on_the_next_step():
    env = ENVIRONMENTS.get("python").create({"code": ENV}, LIMITS)
    try:
        env.reset({"kind": "rebound"})
        assert not env.step("x").done
        result = env.step("x")
        assert result.done and "reward 'high'; expected a finite number" in result.reason, result.reason
    finally:
        env.close()


def test_a_long_state_is_cut():
    env = ENVIRONMENTS.get("python").create({"code": ENV}, LIMITS)
    try:
        env.reset({"kind": "state"})
        result = env.step("x")
        assert not result.done and len(result.state) == 1000
    finally:
        env.close()


class Scripted(RolloutEngine):
    """Every turn of every episode: the same short text."""

    def __init__(self, tokenizer):
        self.ids = tokenizer.encode("ok", add_special_tokens=False)

    def generate(self, prompts, n, params):
        return [[Generation(list(self.ids), "ok", None, "stop") for _ in range(n)] for _ in prompts]


def test_one_malformed_episode_does_not_lose_the_batch(tiny_tokenizer):
    kinds = ["fine", "huge_reward", "list_content", "rebound", "fine"]
    prompts = []
    for i, kind in enumerate(kinds):
        messages = [{"role": "user", "content": f"prompt {i}"}]
        row = PromptRow(id=f"p{i}", row=i + 1, prompt=messages, fields={"kind": kind})
        prompts.append(Prompt(row=row, text="", token_ids=encode_chat(tiny_tokenizer, messages)[1]))
    spec = EnvironmentSpec(
        kind="python", params={"code": ENV}, max_turns=3, max_turn_tokens=8, max_episode_tokens=200,
        tool_timeout_s=3.0, tool_memory_mb=256, max_observation_chars=200,
    )  # fmt: skip
    groups = run_episodes(Scripted(tiny_tokenizer), tiny_tokenizer, prompts, 1, SamplingParams(max_new_tokens=8), spec)
    episodes = {kind: group[0] for kind, group in zip(kinds, groups, strict=True) if kind != "fine"}
    fine = [group[0] for kind, group in zip(kinds, groups, strict=True) if kind == "fine"]
    for episode in fine:
        assert episode.end_reason == "turn_limit" and episode.error is None
        assert [t.reward for t in episode.turns] == [1.0, 1.0, 1.0]
    assert "expected a finite number" in episodes["huge_reward"].turns[-1].reason
    assert "expected {'role'" in episodes["list_content"].turns[-1].reason
    assert len(episodes["rebound"].turns) == 2 and "reward 'high'" in episodes["rebound"].turns[-1].reason
    for episode in episodes.values():
        assert episode.end_reason == "done"
