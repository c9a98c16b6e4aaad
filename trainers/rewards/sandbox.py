"""Running untrusted code (user reward functions, model-written programs) in a separate process.

Nothing here executes user code in the calling process. Each sandbox is a fresh
`python -I trainers/rewards/_sandbox_child.py` process and gets:

- a wall-clock limit, enforced from outside: on expiry the parent SIGKILLs the whole
  process group (the child runs in its own session);
- `RLIMIT_AS` (address space, so unbounded allocation raises MemoryError or fails to map),
  `RLIMIT_CPU` (SIGXCPU, then SIGKILL one second later), `RLIMIT_FSIZE` (largest file it
  may write) and no core dumps, set by the child on itself before user code runs;
- stdin at /dev/null, stdout/stderr into a log file in a temporary working directory that
  is deleted afterwards, and a minimal environment (no API keys or database URLs inherited);
- no network: when `unshare` can create user namespaces (checked once, see
  `isolation_prefix`), the child runs in a new, empty network namespace (loopback down,
  no routes) and a new PID namespace (when the child dies, everything it forked dies too).
  Where `unshare` is not permitted, the only barrier is that the child replaces the
  `socket` module's constructors before user code runs, which determined code can undo;
  `isolation()` says which of the two is in force.

- hidden folders: with namespaces, the child also gets its own mount namespace and covers
  each folder named in `ROLLOUT_SANDBOX_HIDE` (os.pathsep-separated; the studio's workers
  set it to the studio's data folder: database file, secret key, uploads, checkpoints)
  with an empty read-only tmpfs before user code runs. It fails closed: a folder it cannot
  cover stops the child.

Not enforced: a process-count limit (RLIMIT_NPROC is per real user and ignored for root),
filesystem isolation beyond the hidden folders (user code can read other files the
server's user can read, and everything where `unshare` is not permitted), and CPU/memory
cgroups.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("_sandbox_child.py")
# Extra seconds a process may take to start (interpreter, imports) beyond the limit it is given.
STARTUP_GRACE_S = 2.0
LOG_TAIL = 1500
SIGNAL_NAMES = {
    signal.SIGSEGV: "segmentation fault (SIGSEGV)",
    signal.SIGKILL: "killed (SIGKILL: timeout, or the kernel's out-of-memory killer)",
    signal.SIGXCPU: "CPU time limit exceeded (SIGXCPU)",
    signal.SIGXFSZ: "file size limit exceeded (SIGXFSZ)",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGBUS: "bus error (SIGBUS)",
}


@dataclass(frozen=True)
class Limits:
    """What one sandbox process may use. `cpu_s` defaults to the wall-clock limit (rounded up) + 1."""

    timeout_s: float = 5.0
    memory_mb: int = 512
    file_size_mb: int = 16
    cpu_s: int | None = None

    def for_child(self, calls: int = 1) -> dict[str, int]:
        """Limits as the child applies them; a worker serving `calls` calls gets CPU time for all of them."""
        cpu = self.cpu_s if self.cpu_s is not None else math.ceil(self.timeout_s * max(calls, 1)) + 1
        return {"memory_mb": self.memory_mb, "cpu_s": cpu, "file_size_mb": self.file_size_mb}


class SandboxError(RuntimeError):
    """The sandboxed process failed as a whole (could not start, died, timed out); the message says how."""


@functools.cache
def isolation_prefix() -> tuple[str, ...]:
    """`unshare` arguments giving the child empty network and PID namespaces (and its own mount
    namespace, where permitted), or () where not permitted. Checked once per process by running
    `true` under the same flags."""
    unshare = shutil.which("unshare")
    if not unshare:
        return ()
    base = (unshare, "--user", "--map-root-user", "--net", "--pid")
    for prefix in ((*base, "--mount", "--fork", "--kill-child"), (*base, "--fork", "--kill-child")):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0:
                return prefix
        except (OSError, subprocess.SubprocessError):
            pass
    return ()


def isolation() -> str:
    """Which network barrier is in force: 'namespace' (unshare) or 'python' (socket blocked in-process only)."""
    return "namespace" if isolation_prefix() else "python"


HIDE_ENV = "ROLLOUT_SANDBOX_HIDE"


def hidden_folders(keep: list[str]) -> list[str]:
    """The folders of `ROLLOUT_SANDBOX_HIDE` that exist, as real paths, less any that hold one of
    `keep` (the child's own working folder, its interpreter and code must stay visible).
    Empty without a mount namespace, where nothing can be hidden."""
    if "--mount" not in isolation_prefix():
        return []
    kept = [os.path.realpath(k) for k in keep]
    out = []
    for raw in os.environ.get(HIDE_ENV, "").split(os.pathsep):
        path = os.path.realpath(raw) if raw else ""
        if path and os.path.isdir(path) and not any(k == path or k.startswith(path + os.sep) for k in kept):
            out.append(path)
    return out


def _environment(home: str) -> dict[str, str]:
    # A fresh, small environment: secrets in the server's environment never reach user code.
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": "1",
    }


class _Child:
    """One sandbox process and its JSON-lines pipes. Always `close()` it (kills and deletes its folder)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.workdir = tempfile.mkdtemp(prefix="rubric-sandbox-")
        self.log_path = os.path.join(self.workdir, ".sandbox-log")
        config = {**config, "hide": hidden_folders([self.workdir, sys.prefix, sys.base_prefix, _project_root()])}
        self._buffer = b""
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*isolation_prefix(), sys.executable, "-I", str(CHILD)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.workdir,
                env=_environment(self.workdir),
                start_new_session=True,  # its own process group, so one killpg takes everything it started
                close_fds=True,
            )
        self.send(config)

    def send(self, message: dict[str, Any]) -> bool:
        """Write one message; False when the child is already gone."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(message, default=str).encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def receive(self, deadline: float) -> dict[str, Any] | None:
        """The next message, None at end of output (the child exited); TimeoutError after `deadline`."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def exit_description(self) -> str:
        """Why the child is gone: 'segmentation fault (SIGSEGV)', 'exited with code 3', plus its log tail."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if code < 0:
            how = SIGNAL_NAMES.get(-code, f"killed by signal {-code}")
        else:
            how = f"exited with code {code} (os._exit or a fatal error)"
        tail = self.log_tail()
        return f"the sandbox process died: {how}" + (f"; its output ended with: {tail}" if tail else "")

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - LOG_TAIL))
                return log.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


@dataclass
class CallResult:
    """One call into a worker: `value` when ok, else `error`; `crashed` when the worker process is
    gone, `timed_out` when it was killed for taking too long."""

    ok: bool
    value: Any = None
    error: str = ""
    crashed: bool = False
    timed_out: bool = False


class Worker:
    """A sandbox process holding one loaded function, answering many calls (one per sample).

    Loading happens once per process: user source is compiled and executed (a syntax error
    or a failing import raises `SandboxError` from `start`, with the line number), or a trusted
    `module:function` is imported. Each `call` has its own wall-clock limit; when it hangs or
    the process dies the result says so (`crashed=True`) and the worker must be replaced.
    """

    def __init__(self, child: _Child, limits: Limits) -> None:
        self._child = child
        self.limits = limits

    @classmethod
    def start(
        cls,
        limits: Limits,
        *,
        source: str | None = None,
        function: str = "score",
        filename: str = "<user code>",
        trusted_import: str | None = None,
        calls: int = 1,
    ) -> Worker:
        config: dict[str, Any] = {"mode": "worker", "limits": limits.for_child(calls), "function": function}
        if trusted_import:
            config |= {"import": trusted_import, "trusted_import_first": True, "sys_path": [_project_root()]}
        else:
            config |= {"source": source or "", "filename": filename}
        child = _Child(config)
        try:
            reply = child.receive(time.monotonic() + limits.timeout_s + STARTUP_GRACE_S)
        except TimeoutError:
            child.close()
            raise SandboxError(f"loading the code took longer than {limits.timeout_s:g} s") from None
        if reply is None:
            error = child.exit_description()
            child.close()
            raise SandboxError(error)
        if not reply.get("ok"):
            child.close()
            raise SandboxError(reply.get("error", "the code could not be loaded"))
        return cls(child, limits)

    def call(self, *args: Any, **kwargs: Any) -> CallResult:
        if not self._child.send({"args": list(args), "kwargs": kwargs}):
            return CallResult(False, error=self._child.exit_description(), crashed=True)
        try:
            reply = self._child.receive(time.monotonic() + self.limits.timeout_s)
        except TimeoutError:
            self._child.kill()
            return CallResult(False, error=f"timed out after {self.limits.timeout_s:g} s", crashed=True, timed_out=True)
        if reply is None:
            return CallResult(False, error=self._child.exit_description(), crashed=True)
        if reply.get("ok"):
            return CallResult(True, value=reply.get("value"))
        return CallResult(False, error=str(reply.get("error", "unknown error")))

    def close(self) -> None:
        self._child.close()


class WorkerPool:
    """One worker serving a batch of calls: started on the first call, replaced after a call
    that hung or killed it. If the worker cannot start (user code that does not load), every
    later call raises that same `SandboxError` rather than trying again. With
    `give_up_after_timeouts=N`, once N calls in a row have timed out the rest of the batch is
    not run either (`SandboxError` saying so): user code that hangs on every sample would
    otherwise cost the batch's size times the time limit, every training step."""

    def __init__(
        self, limits: Limits, total_calls: int, *, give_up_after_timeouts: int | None = None, **start_kwargs: Any
    ) -> None:
        self.limits = limits
        self.give_up_after_timeouts = give_up_after_timeouts
        self.remaining = total_calls  # sizes the CPU-time limit of a fresh worker
        self.start_kwargs = start_kwargs
        self._worker: Worker | None = None
        self._start_error: SandboxError | None = None
        self._timeouts_in_a_row = 0

    def call(self, *args: Any, **kwargs: Any) -> CallResult:
        if self._start_error is not None:
            raise self._start_error
        if self.give_up_after_timeouts is not None and self._timeouts_in_a_row >= self.give_up_after_timeouts:
            self.remaining -= 1
            raise SandboxError(
                f"not run: the code timed out on {self._timeouts_in_a_row} calls in a row in this batch "
                f"({self.limits.timeout_s:g} s each)"
            )
        if self._worker is None:
            try:
                self._worker = Worker.start(self.limits, calls=max(1, self.remaining), **self.start_kwargs)
            except SandboxError as exc:
                self._start_error = exc
                raise
        self.remaining -= 1
        outcome = self._worker.call(*args, **kwargs)
        self._timeouts_in_a_row = self._timeouts_in_a_row + 1 if outcome.timed_out else 0
        if outcome.crashed:  # the process is gone or was killed: a fresh one takes the next call
            self._worker.close()
            self._worker = None
        return outcome

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    child = _Child(config)
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


def _project_root() -> str:
    # trainers/rewards/sandbox.py -> the folder holding the `trainers` package
    return str(Path(__file__).resolve().parents[2])
