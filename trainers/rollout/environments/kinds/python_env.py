"""python: an environment written by the user as a Python class, run in the sandbox.

    class Env:
        def __init__(self, **options): ...
        def reset(self, row) -> str | list[dict]        # the first messages (a str: one user message)
        def step(self, text) -> (observation, reward, done) | dict

`step` may return a dict with `observation`, `reward`, `done` and optionally `state` and
`answered`; an observation is a str (one message in `observation_role`), a list of messages,
or None / "" for nothing. One sandbox worker per episode holds the object, so its state lasts
the episode, under the episode's time and memory limits. The class is found by parsing the
source when the environment is saved; the studio's process never runs it.

The code is the environment, so when it misbehaves the episode ends (done, with the reason):
a step that raises, hangs, dies or returns something else than the above. A `reset` that fails
raises `EnvironmentFailure`, which the rollout code records as the episode's error. Neither
ever takes the run down. What comes back is plain JSON checked here for shape and size (the
dispatcher runs next to the user's code and may have been rebound): texts exact str, cut to the
observation limit; a reward a finite number; a state short text.
"""

from __future__ import annotations

import math
from typing import Any

from trainers.episodes import Message
from trainers.rollout.environments import bounds
from trainers.rollout.environments.base import ENVIRONMENTS, Environment, EnvironmentStart, EpisodeLimits, StepResult
from trainers.rollout.environments.catalog import PythonEnvParams
from trainers.rollout.environments.tools.sandboxed import EpisodeSandbox, reply_text

DISPATCH = "__rollout_env__"
# Appended to the user's source (after it, so its line numbers stay the user's own). Strings are
# cut here, in the sandbox, so an observation of megabytes never crosses the pipe whole.
DISPATCHER = """

def {dispatch}(method, argument, limit):
    if method == "create":
        {dispatch}.env = {cls}(**argument)
        return None
    value = getattr({dispatch}.env, method)(argument)

    def cut(v):
        if isinstance(v, str) and len(v) > limit:
            # The note counts in the limit (as bounds.text cuts on the host).
            keep = max(limit - len("\\n[truncated: %d more characters]" % len(v)), 0)
            return v[:keep] + "\\n[truncated: %d more characters]" % (len(v) - keep)
        if isinstance(v, (list, tuple)):
            return [cut(x) for x in v]
        if isinstance(v, dict):
            return {{k: cut(x) for k, x in v.items()}}
        return v

    return cut(value)
"""
ROLES = ("system", "user", "assistant", "tool")
MAX_STATE_CHARS = 1000


class EnvironmentFailure(RuntimeError):
    """The user's environment could not start an episode (did not load, `reset` raised or returned
    something unusable); the message says which and why."""


@ENVIRONMENTS.register("python")
class PythonEnvironment(Environment):
    params_model = PythonEnvParams
    params: PythonEnvParams

    def __init__(self, params: PythonEnvParams, limits: EpisodeLimits) -> None:
        super().__init__(params, limits)
        source = params.code + DISPATCHER.format(dispatch=DISPATCH, cls=params.class_name)
        self.sandbox = EpisodeSandbox(source, DISPATCH, limits, filename="<environment>")
        self.failed = ""  # why the episode ended early: the object is gone, later steps must not start a fresh one

    def _call(self, method: str, argument: Any) -> Any:
        outcome = self.sandbox.call(method, argument, self.limits.max_observation_chars)
        if not outcome.ok:
            raise EnvironmentFailure(f"{self.params.class_name}.{method}() failed: {outcome.error}")
        return outcome.value

    def reset(self, row: dict[str, Any]) -> EnvironmentStart:
        self._call("create", self.params.options)
        value = self._call("reset", row)
        try:
            fields, state = {}, ""
            if isinstance(value, dict):
                fields, state = value.get("fields") or {}, _state(value.get("state", ""))
                value = value.get("messages")
                if not isinstance(fields, dict):
                    raise ValueError("'fields' must be a dict")
            messages = self._messages(value, "user")
        except ValueError as exc:
            raise EnvironmentFailure(f"{self.params.class_name}.reset() returned {exc}") from None
        if not messages:
            raise EnvironmentFailure(f"{self.params.class_name}.reset() returned no message")
        return EnvironmentStart(messages=messages, fields=fields, state=state)

    def step(self, text: str) -> StepResult:
        if self.failed:
            return StepResult(done=True, reason=self.failed)
        try:
            return self._step_result(self._call("step", text))
        except EnvironmentFailure as exc:
            self.failed = str(exc)
        except ValueError as exc:
            self.failed = f"{self.params.class_name}.step() returned {exc}"
        return StepResult(done=True, reason=self.failed)

    def _step_result(self, value: Any) -> StepResult:
        if isinstance(value, list) and len(value) == 3:  # a tuple arrives from the sandbox as a list
            value = dict(zip(("observation", "reward", "done"), value, strict=True))
        if not isinstance(value, dict) or not {"reward", "done"} <= set(value):
            raise ValueError(f"{_show(value)}; expected (observation, reward, done) or a dict with those keys")
        reward, done = value["reward"], value["done"]
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not _finite(reward):
            raise ValueError(f"reward {_show(reward)}; expected a finite number")
        if not isinstance(done, bool):
            raise ValueError(f"done {_show(done)}; expected True or False")
        return StepResult(
            observation=self._messages(value.get("observation"), self.params.observation_role),
            reward=float(reward),
            done=done,
            state=_state(value.get("state", "")),
            answered=bool(value.get("answered", False)),
        )

    def _messages(self, value: Any, role: str) -> list[Message]:
        """A str, a list of {"role", "content"} dicts, or nothing; `ValueError` naming what was wrong."""
        if value is None or value == "":
            return []
        if isinstance(value, str):
            return [{"role": role, "content": self._text(value)}]
        if not isinstance(value, list):
            raise ValueError(f"{_show(value)} as messages; expected a str or a list of messages")
        for message in value:
            if not (
                isinstance(message, dict) and message.get("role") in ROLES and isinstance(message.get("content"), str)
            ):
                raise ValueError(f"the message {_show(message)}; expected {{'role': one of {ROLES}, 'content': str}}")
        return [{"role": str(m["role"]), "content": self._text(m["content"])} for m in value]

    def _text(self, value: str) -> str:
        """Text from the sandbox, cut to the observation limit with the note inside it (the dispatcher cut
        it so already, unless it was rebound) and with lone surrogates replaced."""
        if type(value) is not str:
            raise ValueError(f"a message came back as {type(value).__name__}, not text")
        return bounds.short(value, self.limits.max_observation_chars, "a message")

    def close(self) -> None:
        self.sandbox.close()


def _finite(number: int | float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an int too large for a float (10**400)
        return False


def _state(value: Any) -> str:
    """The state key: text (anything else as its repr), at most `MAX_STATE_CHARS`."""
    text = value if type(value) is str else repr(value)
    return reply_text(text[:MAX_STATE_CHARS], MAX_STATE_CHARS, "the state")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
