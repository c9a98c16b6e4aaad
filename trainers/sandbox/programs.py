"""Model-written programs run against tests in the sandbox (the `code_exec` criterion): one worker per
program, stdin/stdout or function-call tests, a verdict per test."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from trainers.sandbox.process import (
    MAX_ERROR_CHARS,
    STARTUP_GRACE_S,
    Limits,
    MalformedReply,
    SandboxChild,
    SandboxError,
)

MAX_GOT_CHARS = 300  # what a result keeps of a program's output


@dataclass
class TestRun:
    """Per-test results of one program: `results[i]` has `passed` and maybe `got`/`error`;
    tests that never ran (time ran out) are missing. `fatal` is set when no test could run."""

    results: dict[int, dict[str, Any]]
    fatal: str | None = None
    timed_out: bool = False


def run_program_tests(code: str, tests: list[Any], style: str, limits: Limits) -> TestRun:
    """Run `code` against `tests` in one sandbox process: `style` "stdio" (tests are {input, output})
    or "asserts" (tests are Python statements run after the program). `limits.timeout_s` covers
    all the tests together. What the sandbox sends back is checked: a result that is not
    `{"test": <index>, "passed": <bool>, ...}` counts as a failed test, saying so."""
    config = {"mode": "tests", "code": code, "tests": tests, "style": style}
    config |= {"limits": limits.for_child(), "timeout_s": limits.timeout_s}
    try:
        child = SandboxChild(config)
    except SandboxError as exc:  # refused (no bubblewrap): no test ran, and the result says why
        return TestRun(results={}, fatal=str(exc))
    deadline = time.monotonic() + limits.timeout_s + STARTUP_GRACE_S
    run = TestRun(results={})
    try:
        while True:
            try:
                message = child.receive(deadline)
            except TimeoutError:
                run.timed_out = True
                break
            except MalformedReply as exc:
                run.fatal = f"the sandbox sent {exc}"
                break
            if message is None:
                if len(run.results) < len(tests):
                    run.fatal = child.exit_description()
                break
            if "fatal" in message:
                run.fatal = _text(message["fatal"], MAX_ERROR_CHARS)
                break
            index = message.get("test")
            if type(index) is not int or not 0 <= index < len(tests):
                run.fatal = "the sandbox sent a result for no test it was given"
                break
            run.results[index] = _checked(message)
            if len(run.results) == len(tests):
                break
    finally:
        child.close()
    return run


def _checked(message: dict[str, Any]) -> dict[str, Any]:
    """One test's result, as plain values: `passed` a bool, `got` and `error` short text."""
    out: dict[str, Any] = {"test": message["test"], "passed": message.get("passed") is True}
    if not isinstance(message.get("passed"), bool):
        out["error"] = "the test's result was malformed"
    for key, limit in (("got", MAX_GOT_CHARS), ("error", MAX_ERROR_CHARS)):
        if key in message and key not in out:
            out[key] = _text(message[key], limit)
    return out


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else repr(value)[:limit]
    return text.encode("utf-8", "replace").decode("utf-8")[:limit]
