"""The python kind: a user's environment class, one sandbox worker per episode."""

import pytest
from pydantic import ValidationError

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds import ENVIRONMENTS
from trainers.rollout.environments.kinds.python_env import EnvironmentFailure

LIMITS = EpisodeLimits(tool_timeout_s=2, tool_memory_mb=256, max_observation_chars=50)
GUESS = """
class Guess:
    def __init__(self, target=3):
        self.target = target
        self.tries = 0

    def reset(self, row):
        return {"messages": [{"role": "system", "content": "Guess."}, {"role": "user", "content": row["hint"]}],
                "fields": {"target": self.target}, "state": "start"}

    def step(self, text):
        self.tries += 1
        if text.strip() == str(self.target):
            return "right", 1.0, True
        if text == "give up":
            return {"observation": None, "reward": -1, "done": True, "answered": True}
        if text == "long":
            return "y" * 1000, 0.0, False
        if text == "reward":
            return "?", float("nan"), False
        if text == "tuple":
            return 5
        if text == "role":
            return [{"role": "robot", "content": "hi"}], 0.0, False
        return {"observation": f"wrong ({self.tries})", "reward": 0.0, "done": False, "state": str(self.tries)}
"""


def make(**params):
    return ENVIRONMENTS.get("python").create({"code": GUESS, "class_name": "Guess", **params}, LIMITS)


@pytest.fixture
def env():
    environment = make(options={"target": 4})
    yield environment
    environment.close()


def test_an_episode_keeps_the_objects_state_between_steps(env):
    start = env.reset({"messages": [], "hint": "1 to 5"})
    assert start.messages == [{"role": "system", "content": "Guess."}, {"role": "user", "content": "1 to 5"}]
    assert (start.fields, start.state) == ({"target": 4}, "start")
    first, second = env.step("1"), env.step("2")
    assert (first.observation, first.reward, first.done, first.state) == (
        [{"role": "user", "content": "wrong (1)"}],
        0.0,
        False,
        "1",
    )
    assert second.observation[0]["content"] == "wrong (2)"
    last = env.step("4")
    assert (last.observation, last.reward, last.done) == ([{"role": "user", "content": "right"}], 1.0, True)


def test_a_dict_answer_and_the_observation_role():
    env = make(observation_role="tool")
    try:
        env.reset({"hint": "x"})
        assert env.step("2").observation[0]["role"] == "tool"
        ended = env.step("give up")
        assert (ended.observation, ended.reward, ended.done, ended.answered) == ([], -1.0, True, True)
    finally:
        env.close()


def test_long_observations_are_cut_in_the_sandbox(env):
    env.reset({"hint": "x"})
    # The note counts in the 50 characters: 16 of the 1,000 kept.
    assert env.step("long").observation[0]["content"] == "y" * 16 + "\n[truncated: 984 more characters]"


@pytest.mark.parametrize(
    ("turn", "reason"),
    [
        ("reward", "Guess.step() returned reward nan; expected a finite number"),
        ("tuple", "Guess.step() returned 5; expected (observation, reward, done)"),
        ("role", "Guess.step() returned the message {'role': 'robot', 'content': 'hi'}"),
    ],
)
def test_a_bad_return_ends_the_episode_with_a_clear_reason(env, turn, reason):
    env.reset({"hint": "x"})
    result = env.step(turn)
    assert result.done and result.reason.startswith(reason), result.reason
    assert env.step("4").reason == result.reason  # ended: no fresh object is made behind the episode's back


def test_a_reset_that_fails_raises_with_the_reason():
    env = ENVIRONMENTS.get("python").create(
        {"code": "class Env:\n    def reset(self, row):\n        return 3\n    def step(self, text):\n        pass\n"},
        LIMITS,
    )
    try:
        with pytest.raises(EnvironmentFailure, match=r"Env.reset\(\) returned 3 as messages"):
            env.reset({})
    finally:
        env.close()


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"code": "class Env:\n    def reset(self, row):\n        pass\n"}, "class Env has no method step()"),
        ({"code": "class Other:\n    pass\n"}, "defines no top-level class Env"),
        ({"code": "class Env(:\n"}, "syntax error at line 1"),
    ],
)
def test_bad_code_is_refused_when_saved(params, error):
    with pytest.raises(ValidationError, match=None) as caught:
        ENVIRONMENTS.get("python").params_model.model_validate(params)
    assert error in str(caught.value), str(caught.value)
