"""One sandbox worker per episode, for tools and environments written in Python.

The worker (`trainers.sandbox.process.WorkerPool`) is started on the first call, so an episode
that never calls the tool costs no process; it keeps its state (variables, imports, a user
environment's object) from call to call, and is replaced after a call that hung or killed it.
Like every sandbox worker it must be started, called and closed from one thread: the rollout
code runs each episode's environment on a thread of its own.

What a call returns is plain JSON of any shape (the code in the sandbox, the tool's own helpers
included, may have been rebound by the model's code): callers check it with `reply_text` and
`reply_count`, and a `MalformedValue` ends that call with the reason, never the episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainers.rollout.environments import bounds
from trainers.rollout.environments.base import EpisodeLimits
from trainers.sandbox.process import CallResult, Limits, SandboxError, WorkerPool

# Calls one episode may make; sizes the worker's CPU-time backstop (the wall clock of each call
# is the real limit). A turn runs at most this many tool calls.
MAX_CALLS_PER_TURN = 8
# After this many timeouts in a row the worker is not started again for the episode: a model
# that writes `while True` every turn must not cost max_turns x tool_timeout_s.
GIVE_UP_AFTER_TIMEOUTS = 2
INTERPRETER = Path(__file__).with_name("_interpreter.py")


class MalformedValue(ValueError):
    """A value from the sandbox that is not what the tool's protocol says (a list where text was
    due, a count that is not a whole number...)."""


def reply_text(value: Any, limit: int, what: str, *, keep_end: bool = False) -> str:
    """`value` as text of at most `limit` characters (its start, or its end): it must be an exact
    str (JSON gives no subclass); lone surrogates become U+FFFD so the text can be encoded."""
    if type(value) is not str:
        raise MalformedValue(f"{what} came back as {type(value).__name__}, not text")
    return bounds.clean(value[-limit:] if keep_end and limit else value[:limit])


def reply_count(value: Any, what: str) -> int:
    """A count of characters: a whole number >= 0 (not a bool), capped at 10**12."""
    if type(value) is not int or value < 0:
        raise MalformedValue(f"{what} came back as {type(value).__name__}, not a count")
    return min(value, 10**12)


def sandbox_limits(limits: EpisodeLimits) -> Limits:
    return Limits(timeout_s=limits.tool_timeout_s, memory_mb=limits.tool_memory_mb)


class EpisodeSandbox:
    """`source` loaded once in a sandbox worker; `call` runs its `function`. A worker that could not
    start, or was given up on, answers every call with `crashed=True` and the reason."""

    def __init__(self, source: str, function: str, limits: EpisodeLimits, filename: str) -> None:
        calls = limits.max_turns * MAX_CALLS_PER_TURN + 2
        self._pool = WorkerPool(
            sandbox_limits(limits),
            calls,
            give_up_after_timeouts=GIVE_UP_AFTER_TIMEOUTS,
            source=source,
            function=function,
            filename=filename,
        )

    def call(self, *args: Any) -> CallResult:
        try:
            return self._pool.call(*args)
        except SandboxError as exc:  # did not load, or given up on: nothing ran
            return CallResult(False, error=str(exc), crashed=True)

    def close(self) -> None:
        self._pool.close()
