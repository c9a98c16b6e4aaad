"""A small environment kind for the studio's tests, registered once on import (never removed:
tests must not leave the registry changed under others; a second import finds it there).

The studio's tests need a kind with a params form and bounds; they must not depend on which
built-in kinds a branch has. It counts down: each turn says the next number; the model is done
when it says the `word`."""

from __future__ import annotations

from pydantic import BaseModel, Field

from trainers.rollout.environments.base import ENVIRONMENTS, Environment, EnvironmentStart, StepResult

KIND = "test_countdown"


class CountdownParams(BaseModel):
    """What the countdown says and where it starts."""

    word: str = Field("done", min_length=1, description="The model ends the episode by saying this.")
    start: int = Field(3, ge=1, le=10, description="The number the countdown starts from.")


class Countdown(Environment):
    """Counts down from `start`; the model ends it by saying `word`."""

    params_model = CountdownParams

    def reset(self, row):
        self.left = self.params.start
        return EnvironmentStart(messages=row["messages"])

    def step(self, text):
        if self.params.word in text:
            return StepResult(reward=1.0, reason="said the word", done=True, answered=True)
        self.left -= 1
        return StepResult(observation=[{"role": "user", "content": str(self.left)}], done=self.left <= 0)


if KIND not in ENVIRONMENTS:
    ENVIRONMENTS.register(KIND)(Countdown)

CONFIG = {"kind": KIND, "params": {"word": "stop", "start": 3}, "max_turns": 3}
