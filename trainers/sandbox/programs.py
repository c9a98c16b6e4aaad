"""Model-written programs run against tests in the sandbox (the `code_exec` criterion): one worker per
program, stdin/stdout or function-call tests, a verdict per test."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from trainers.sandbox.process import STARTUP_GRACE_S, Limits, SandboxChild, SandboxError


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
    all the tests together."""
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
            if message is None:
                if len(run.results) < len(tests):
                    run.fatal = child.exit_description()
                break
            if "fatal" in message:
                run.fatal = message["fatal"]
                break
            run.results[int(message["test"])] = message
            if len(run.results) == len(tests):
                break
    finally:
        child.close()
    return run
