"""A small environment for rollout and loop tests, registered as kind "test-echo": each turn is
answered by a fixed tool message; the episode is done after `turns` turns. It records which
thread ran each of its calls, so tests can check that an environment lives on one thread."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

from pydantic import BaseModel

from trainers.episodes import ToolCall
from trainers.rollout.environments.base import ENVIRONMENTS, Environment, EnvironmentStart, StepResult

TOOL_TEXT = "result 7"


class EchoParams(BaseModel):
    turns: int = 2  # done after this many turns (0: never done, the limits end it)
    reward: float = 0.5  # each turn's reward
    sleep_s: float = 0.0  # a tool's latency
    fail_on: str = ""  # "reset" or "step": raise there (an environment bug)


class Echo(Environment):
    params_model = EchoParams
    params: EchoParams
    calls: ClassVar[list[tuple[int, str, int]]] = []  # (id(env), method, thread id), every instance's

    def _seen(self, method: str) -> None:
        Echo.calls.append((id(self), method, threading.get_ident()))

    def reset(self, row: dict[str, Any]) -> EnvironmentStart:
        self._seen("reset")
        if self.params.fail_on == "reset":
            raise RuntimeError("reset failed on purpose")
        self.turn = 0
        return EnvironmentStart(messages=row["messages"], fields={"secret": 7}, state="start")

    def step(self, text: str) -> StepResult:
        self._seen("step")
        if self.params.fail_on == "step":
            raise RuntimeError("step failed on purpose")
        time.sleep(self.params.sleep_s)
        self.turn += 1
        done = self.turn == self.params.turns
        return StepResult(
            observation=[] if done else [{"role": "tool", "content": TOOL_TEXT}],
            reward=self.params.reward,
            reason=f"turn {self.turn}",
            done=done,
            tool_calls=[] if done else [ToolCall(name="echo", arguments={"text": text[:10]}, result=TOOL_TEXT)],
            state=f"after {self.turn}",
            answered=done,
        )

    def stop_strings(self) -> list[str]:
        return ["</tool_call>"]

    def close(self) -> None:
        self._seen("close")


if "test-echo" not in ENVIRONMENTS:
    ENVIRONMENTS.register("test-echo")(Echo)
