"""What one step returns is bounded as a whole, with notes that fit inside their limits (bounds.step_result
over the real sandboxed python environment and python tool): a cut text's note counts in the limit, a step
of 20,000 messages keeps at most 16 and a bounded total, and output written to the raw stdout descriptor
comes back cut with a note instead of empty; the next step and the next episode still work."""

import json

import pytest

from trainers.rollout.environments import bounds
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds import ENVIRONMENTS
from trainers.sandbox.process import isolation, weak_allowed

LIMIT = 200
LIMITS = EpisodeLimits(tool_timeout_s=10.0, tool_memory_mb=256, max_observation_chars=LIMIT)
pytestmark = pytest.mark.skipif(
    isolation() != "bubblewrap" and not weak_allowed(), reason="no sandbox can run user code here"
)
ENV = """
class Env:
    def reset(self, row):
        self.kind = row["kind"]
        return "go"

    def step(self, text):
        if self.kind == "flood":
            return [{"role": "user", "content": "m" * 5000} for _ in range(20_000)], 0.0, False
        if self.kind == "long":
            return "y" * 5000, 0.0, False
        return "fine", 1.0, False
"""


def episode(kind):
    env = ENVIRONMENTS.get("python").create({"code": ENV}, LIMITS)
    env.reset({"kind": kind})
    return env


def test_a_cut_observation_and_its_note_fit_the_limit():
    env = episode("long")
    try:
        [message] = bounds.step_result(env.step("x"), LIMITS).observation
        note = "\n[truncated: 4834 more characters]"  # 166 of the 5,000 kept
        assert message["content"] == "y" * (LIMIT - len(note)) + note and len(message["content"]) <= LIMIT
    finally:
        env.close()


def test_a_step_of_20000_messages_is_bounded_in_count_and_in_all():
    env = episode("flood")
    try:
        raw = env.step("x")
        result = bounds.step_result(raw, LIMITS)
        contents = [m["content"] for m in result.observation]
        assert len(contents) <= bounds.MAX_OBSERVATION_MESSAGES
        assert all(len(c) <= LIMIT for c in contents)
        assert sum(map(len, contents)) <= LIMIT * bounds.STEP_OBSERVATION_LIMITS
        kept = len(contents)
        assert contents[-1].endswith(f"\n[{20_000 - kept} more messages dropped]")
        assert bounds.step_result(env.step("x"), LIMITS).observation[0]["content"].startswith("m")  # steps go on
    finally:
        env.close()
    fresh = episode("fine")  # and the next episode runs
    try:
        assert bounds.step_result(fresh.step("x"), LIMITS).observation == [{"role": "user", "content": "fine"}]
    finally:
        fresh.close()


def test_the_dropped_note_fits_a_message_at_its_limit():
    observation = [{"role": "tool", "content": "z" * 10_000}] * 40
    out = bounds.messages(observation, 100, 16, "the observation", total=1000)
    assert [len(m["content"]) <= 100 for m in out] == [True] * len(out)
    assert sum(len(m["content"]) for m in out) <= 1000 and out[-1]["content"].endswith(
        f"[{40 - len(out)} more messages dropped]"
    )
    assert bounds.text("abc", 5) == ("abc", False)
    assert bounds.text("x" * 50, 5) == ("[trun", True)  # no room for the note: the word for it, cut


def tool_call(code: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'python', 'arguments': {'code': code}})}</tool_call>"


@pytest.fixture
def python_tool():
    env = ENVIRONMENTS.get("tools").create({"tools": [{"kind": "python"}]}, LIMITS)
    env.reset({"messages": []})
    yield env
    env.close()


def test_raw_stdout_past_the_size_limit_comes_back_cut_not_empty(python_tool):
    [small] = python_tool.step(tool_call("import os\nos.write(1, b'raw hello\\n')\nNone")).tool_calls
    assert (small.result, small.error) == ("raw hello\n", None)
    [flood] = python_tool.step(tool_call("import os\nos.write(1, b'x' * (20 << 20))\nNone")).tool_calls
    # 20 MiB asked, 16 MiB (the sandbox's file-size limit) written: the start kept, the rest counted.
    note = "\n[truncated: 16777054 more characters]"  # 162 of the 16,777,216 bytes kept
    assert flood.truncated and flood.result == "x" * (LIMIT - len(note)) + note, flood.result[-80:]
    [failing] = python_tool.step(
        tool_call("import os\nfor _ in range(20):\n    os.write(1, b'y' * (1 << 20))")
    ).tool_calls
    assert "File too large" in failing.error and failing.result.startswith("yyy")
    assert len(failing.result) <= LIMIT
    [after] = python_tool.step(tool_call("print('after')")).tool_calls
    assert (after.result, after.error) == ("after\n", None)  # the interpreter goes on, its fds its own again
