"""Running untrusted code (user reward functions, model-written programs) in a separate process.

Nothing here executes user code in the calling process. Each sandbox is a fresh
`python -I trainers/sandbox/_child.py` process, started under bubblewrap (`bwrap`,
Debian's `bubblewrap` package), and gets:

- a file system of its own, built from nothing: /usr (and the /bin, /lib... links to it)
  read-only; the interpreter's folders read-only at their own paths (its prefix with the
  standard library, the virtual environment and its site-packages: every installed package,
  nothing else of the project or of the home that holds them); the child script read-only
  (the whole `trainers` package only for a trusted `module:function` import); from /etc only
  the dynamic loader's cache, the time zone and a one-line passwd/group naming the sandbox
  user; a fresh /proc and a minimal /dev; an empty /tmp with a private writable temporary
  folder as home and working directory, deleted afterwards. No /root (beyond the path to an
  interpreter installed there), no home of the worker's user, no studio data folder, no
  /etc/shadow. Folders named in `ROLLOUT_SANDBOX_HIDE` (os.pathsep-separated; the workers
  set the studio's data folder) are covered with an empty tmpfs if they lie inside one of
  the folders above;
- uid/gid 65534 in a new user namespace, every capability dropped, and new network (no
  interfaces but a loopback with nothing on it), PID, IPC, UTS and cgroup namespaces;
  `--die-with-parent` and `--new-session` (no terminal to inject into). When the sandbox's
  first process dies, the kernel kills everything it forked;
- a wall-clock limit, enforced from outside: on expiry the parent SIGKILLs bubblewrap (in
  its own process group), and with it the whole sandbox;
- `RLIMIT_AS` (address space, so unbounded allocation raises MemoryError or fails to map),
  `RLIMIT_CPU` (SIGXCPU, then SIGKILL one second later), `RLIMIT_FSIZE` (largest file it
  may write) and no core dumps, set by the child on itself before user code runs;
- stdin at /dev/null, stdout/stderr into a log file in its temporary folder (only the last
  `LOG_TAIL` characters are ever read back), and a minimal environment (no API keys or
  database URLs inherited).

Fail closed: where bubblewrap is missing or cannot create namespaces (a container whose
seccomp profile forbids them, a kernel without unprivileged user namespaces), every start
raises `SandboxError` saying why and how to install it, unless `ROLLOUT_SANDBOX_ALLOW_WEAK=1`
allows the weak fallback: a plain child process with the same limits and environment, whose
only network barrier is that the child replaces the `socket` module's constructors (which
determined code can undo), and which can read every file the worker's user can.
`isolation()` says which of the two this machine gives; `ROLLOUT_SANDBOX_BWRAP` names the
bwrap executable when it is not the one on PATH.

Not enforced: a process-count limit (RLIMIT_NPROC counts per real user and the namespace's
uid 65534 is the worker's own user outside it, often root, for whom it is ignored), CPU and
memory cgroups (RLIMIT_AS is per process: a child that forks can use more in all), and a
seccomp filter on system calls (the kernel's whole interface is reachable, as from any
unprivileged user in a user namespace). Installed packages and /usr are readable: keep
credentials out of them.
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
import site
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("_child.py")
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

BWRAP_ENV = "ROLLOUT_SANDBOX_BWRAP"
ALLOW_WEAK_ENV = "ROLLOUT_SANDBOX_ALLOW_WEAK"
HIDE_ENV = "ROLLOUT_SANDBOX_HIDE"
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; `./studioctl setup` does it as root)"
SANDBOX_ID = "65534"  # uid and gid inside the sandbox: Debian's `nobody`, owner of nothing
BWRAP_FLAGS = (
    *("--unshare-all", "--unshare-user", "--uid", SANDBOX_ID, "--gid", SANDBOX_ID, "--hostname", "sandbox"),
    *("--cap-drop", "ALL", "--die-with-parent", "--new-session"),
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The dynamic loader's cache (libraries in /usr/lib/<arch>) and the time zone; nothing else of /etc.
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
PASSWD = "sandbox:x:{id}:{id}:reward sandbox:{home}:/usr/sbin/nologin\n"  # getpass.getuser() must not fail
GROUP = "sandbox:x:{id}:\n"
# A bwrap that exits 128 + N reports that the process it ran died of signal N.
SIGNALLED_BASE = 128


@dataclass(frozen=True)
class Limits:
    """What one sandbox process may use. `cpu_s` defaults to the wall-clock time it may take (its
    calls' limits plus the start-up grace), rounded up, + 1: a backstop behind the wall clock, which
    gives the clearer message ("timed out after ..."), so it must not run out first."""

    timeout_s: float = 5.0
    memory_mb: int = 512
    file_size_mb: int = 16
    cpu_s: int | None = None

    def for_child(self, calls: int = 1) -> dict[str, int]:
        """Limits as the child applies them; a worker serving `calls` calls gets CPU time for all of them."""
        wall = self.timeout_s * max(calls, 1) + STARTUP_GRACE_S
        cpu = self.cpu_s if self.cpu_s is not None else math.ceil(wall) + 1
        return {"memory_mb": self.memory_mb, "cpu_s": cpu, "file_size_mb": self.file_size_mb}


class SandboxError(RuntimeError):
    """The sandboxed process failed as a whole (could not start, died, timed out), or was refused
    (no bubblewrap, see `isolation()`); the message says how."""


def isolation() -> str:
    """What user code gets on this machine: 'bubblewrap', or 'weak' (a plain child process: the
    limits and a clean environment, but the worker's files and, for determined code, its network
    in reach). With 'weak', user code runs only where `ROLLOUT_SANDBOX_ALLOW_WEAK` allows it."""
    return "weak" if bwrap_problem(bwrap_path()) else "bubblewrap"


def bwrap_path() -> str | None:
    """`ROLLOUT_SANDBOX_BWRAP`, else the `bwrap` on PATH, else None."""
    return os.environ.get(BWRAP_ENV) or shutil.which("bwrap")


def weak_allowed() -> bool:
    """Whether `ROLLOUT_SANDBOX_ALLOW_WEAK` opts in to the weak fallback; a value that is not a
    yes or a no raises, so a typo never decides it."""
    raw = os.environ.get(ALLOW_WEAK_ENV, "").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("", "0", "false", "no", "off"):
        return False
    raise SandboxError(f"{ALLOW_WEAK_ENV}={raw!r}: expected 1 or 0")


@functools.cache
def bwrap_problem(path: str | None) -> str | None:
    """Why bubblewrap at `path` cannot build the sandbox here, or None when it can. Checked once
    per process and path by starting the interpreter in the same view user code gets."""
    if not sys.platform.startswith("linux"):
        return "bubblewrap runs on Linux only"
    if not path:
        return f"bubblewrap (bwrap) is not installed (not on PATH, and {BWRAP_ENV} is not set)"
    if not os.access(path, os.X_OK):
        return f"{path} (named by {BWRAP_ENV} or found on PATH) does not exist or is not executable"
    command = [path, *BWRAP_FLAGS, *_view_args(), "--", sys.executable, "-I", "-c", "pass"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{path} could not be run: {exc}"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return f"{path} cannot create the sandbox here ({said[0]}); it needs unprivileged user namespaces"
    return None


def _launcher() -> str | None:
    """The bwrap to start user code under; None where the weak fallback is allowed. Refuses
    (SandboxError) where neither."""
    path = bwrap_path()
    problem = bwrap_problem(path)
    if problem is None:
        return path
    if weak_allowed():
        return None
    raise SandboxError(
        f"user code is not run without its sandbox: {problem}. To fix it, {INSTALL_HINT}; on a single-user "
        f"machine only, {ALLOW_WEAK_ENV}=1 runs it with the weak fallback (it can read the worker's files)"
    )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@functools.cache
def _python_dirs() -> tuple[str, ...]:
    """The interpreter's folders, as real paths, outermost only: its prefixes (standard library,
    virtual environment) and site-packages, less those under /usr (bound whole)."""
    named = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *site.getsitepackages())
    named += (os.path.dirname(os.path.realpath(sys.executable)),)
    found = {os.path.realpath(p) for p in named if os.path.isdir(p)}
    outer = {p for p in found if not any(q != p and _inside(p, q) for q in found)}
    return tuple(sorted(p for p in outer if p != os.sep and not _inside(p, "/usr")))


@functools.cache
def _view_args() -> tuple[str, ...]:
    """bwrap arguments for the part of the view every sandbox shares: the system, an empty /tmp,
    /proc, /dev, the interpreter (read-only, at its real paths, linked from the named ones) and
    the few /etc files."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # merged /usr: /lib -> usr/lib
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    # /tmp first: a bind below (an interpreter under /tmp) must not be covered by it.
    args += ["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    for path in _python_dirs():
        args += ["--ro-bind", path, path]
    for named in (sys.prefix, sys.base_prefix):
        real = os.path.realpath(named)
        if real != os.path.abspath(named) and not _inside(named, "/usr"):  # the interpreter runs by its named path
            args += ["--symlink", real, named]
    for path in ETC_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return tuple(args)


def _data_fd(text: str) -> int:
    """A pipe's read end holding `text` (small: it fits the pipe's buffer), for bwrap's --ro-bind-data."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as out:
        out.write(text)
    return read_fd


def _bwrap_command(bwrap: str, workdir: str, *, package: bool) -> tuple[list[str], list[int]]:
    """The bwrap arguments (ending in `--`) for one sandbox, and the descriptors they read.
    `package`: the whole `trainers` package is visible (trusted imports), else only the child script."""
    code = os.path.join(_project_root(), "trainers") if package else str(CHILD)
    fds = [_data_fd(PASSWD.format(id=SANDBOX_ID, home=workdir)), _data_fd(GROUP.format(id=SANDBOX_ID))]
    args = [bwrap, *BWRAP_FLAGS, *_view_args(), "--ro-bind", code, code]
    args += ["--ro-bind-data", str(fds[0]), "/etc/passwd", "--ro-bind-data", str(fds[1]), "/etc/group"]
    args += ["--bind", workdir, workdir, "--chdir", workdir]
    for path in _hidden_folders(["/usr", *_python_dirs(), code, workdir]):
        args += ["--tmpfs", path, "--remount-ro", path]
    return [*args, "--"], fds


def _hidden_folders(bound: list[str]) -> list[str]:
    """The folders of `ROLLOUT_SANDBOX_HIDE` that lie inside one of `bound` (elsewhere they are not
    in the view at all), as real paths, less any that hold one of `bound` (which must stay visible)."""
    out = []
    for raw in os.environ.get(HIDE_ENV, "").split(os.pathsep):
        path = os.path.realpath(raw) if raw else ""
        if not path or not os.path.isdir(path):
            continue
        if any(_inside(path, b) for b in bound) and not any(_inside(b, path) for b in bound):
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


class SandboxChild:
    """One sandbox process and its JSON-lines pipes. Always `close()` it (kills and deletes its folder)."""

    def __init__(self, config: dict[str, Any]) -> None:
        bwrap = _launcher()  # refuses before anything is made
        self.workdir = tempfile.mkdtemp(prefix="rubric-sandbox-")
        self.log_path = os.path.join(self.workdir, ".sandbox-log")
        self.wrapped = bwrap is not None
        command, fds = [sys.executable, "-I", str(CHILD)], []
        if bwrap:
            prefix, fds = _bwrap_command(bwrap, self.workdir, package="import" in config)
            command = prefix + command
        self._buffer = b""
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    cwd=self.workdir,
                    env=_environment(self.workdir),
                    start_new_session=True,  # its own process group, so one killpg takes everything it started
                    close_fds=True,
                    pass_fds=fds,
                )
        finally:
            for fd in fds:
                os.close(fd)
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
        signum = -code if code < 0 else 0
        if self.wrapped and SIGNALLED_BASE < code < SIGNALLED_BASE + signal.NSIG:
            signum = code - SIGNALLED_BASE  # bwrap passes on a signal as 128 + N (as a shell does)
        if signum:
            how = SIGNAL_NAMES.get(signum, f"killed by signal {signum}")
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
    Call and close it from the thread that started it: bubblewrap's `--die-with-parent` ends
    the sandbox when that thread exits (the kernel's parent-death signal follows the thread).
    """

    def __init__(self, child: SandboxChild, limits: Limits) -> None:
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
        child = SandboxChild(config)
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



def _project_root() -> str:
    # trainers/sandbox/process.py -> the folder holding the `trainers` package
    return str(Path(__file__).resolve().parents[2])
