"""Running untrusted code (user reward functions, model-written programs) in a separate process.

Why this module is long: it is the host side of one trust boundary (how the sandbox is built, and how
what comes back is read), kept in one place to be read and reviewed as a whole.

Nothing here executes user code in the calling process. Each sandbox is a fresh
`python -I trainers/sandbox/_child.py` process, started under bubblewrap (`bwrap`,
Debian's `bubblewrap` package), and gets:

- a file system of its own, built from nothing: /usr (and the /bin, /lib... links to it)
  read-only; the interpreter's folders read-only at their own paths (its prefix with the
  standard library, the virtual environment and its site-packages: every installed package,
  nothing else of the project or of the home that holds them); the child script read-only
  (the whole `trainers` package only for a trusted `module:function` import); from /etc only
  the dynamic loader's cache, the time zone and a one-line passwd/group naming the sandbox
  user; a fresh /proc and a minimal /dev; an empty /tmp, a memory file system of `disk_mb`
  (bwrap `--size`) holding a private working folder, which is also home: the sandbox's disk
  quota, nothing of it written to the host's disk, gone with the process. No /root (beyond the path to an
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
- stdin at /dev/null, stdout/stderr into a pipe the host drains (only the last `LOG_TAIL`
  characters are kept), and a minimal environment (no API keys or database URLs inherited).

What crosses back is untrusted. The host never opens a path in the sandbox's folder: requests,
replies and the log travel over pipes the host created, read without blocking, against a
deadline, and within a size (`MAX_REPLY_BYTES` a reply; the log's tail). Every request carries a
fresh random tag that its reply must start with (`<tag> <json>` on a line of its own), so bytes
the sandboxed code writes onto the reply pipe are skipped and can never stand in for a later
call's reply (user code shares the interpreter's process, so it can always reach that pipe: at
most it answers the call it is running, as returning a value does). A reply that is not JSON,
not the agreed shape, or too large ends its call with `MalformedReply`'s message, and the worker
is replaced; the value inside an ok reply is plain JSON, which each caller checks for its shape.

Fail closed: where bubblewrap is missing or cannot create namespaces (a container whose
seccomp profile forbids them, a kernel without unprivileged user namespaces), every start
raises `SandboxError` saying why and how to install it, unless `ROLLOUT_SANDBOX_ALLOW_WEAK=1`
allows the weak fallback: a plain child process with the same limits and environment, a
working folder on the host's disk (only `RLIMIT_FSIZE` bounds it, file by file), whose only
network barrier is that the child replaces the `socket` module's constructors (which
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
import secrets
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
LOG_KEEP_BYTES = 4 * LOG_TAIL  # the log's tail as bytes (UTF-8: up to 4 a character)
# The largest reply (one line) the host reads; a longer one ends its call and the worker. Callers
# cut user values in the sandbox to far less (an observation's characters).
MAX_REPLY_BYTES = 8 << 20
MAX_ERROR_CHARS = 2000  # an error message from the sandbox is cut to this
DRAIN_AFTER_EXIT_S = 0.5  # the most the host waits for the rest of a dead sandbox's log
WORKDIR_PREFIX = "rubric-sandbox-"
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
    # /tmp and the working folder together (one memory file system, sized by bwrap): what the code
    # may write in all. Memory outside `memory_mb`; the weak fallback has no such quota.
    disk_mb: int = 64
    # Wall-clock limit of loading the code, when it differs from a call's (a verifiers environment
    # imports its library and builds its dataset once: seconds, where a call takes milliseconds).
    load_timeout_s: float | None = None

    @property
    def load_s(self) -> float:
        return self.timeout_s if self.load_timeout_s is None else self.load_timeout_s

    def for_child(self, calls: int = 1) -> dict[str, int]:
        """Limits as the child applies them; a worker serving `calls` calls gets CPU time for all of them."""
        wall = self.timeout_s * max(calls, 1) + STARTUP_GRACE_S + max(self.load_s - self.timeout_s, 0)
        cpu = self.cpu_s if self.cpu_s is not None else math.ceil(wall) + 1
        return {"memory_mb": self.memory_mb, "cpu_s": cpu, "file_size_mb": self.file_size_mb, "disk_mb": self.disk_mb}


class SandboxError(RuntimeError):
    """The sandboxed process failed as a whole (could not start, died, timed out), or was refused
    (no bubblewrap, see `isolation()`); the message says how."""


class MalformedReply(SandboxError):
    """What the sandbox sent back is not a reply the host can use (too large, not JSON, not the
    agreed shape); the message says which, never what it held."""


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
    command = [path, *BWRAP_FLAGS, *_view_args(Limits.disk_mb), "--", sys.executable, "-I", "-c", "pass"]
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
def _python_dirs(python: str | None = None) -> tuple[str, ...]:
    """The interpreter's folders, as real paths, outermost only: its prefixes (standard library,
    virtual environment) and site-packages, less those under /usr (bound whole). `python`: another
    virtual environment's interpreter (`<venv>/bin/python`) instead of this one: that environment's
    folder and its base interpreter's prefix (pyvenv.cfg's `home`), nothing of the studio's."""
    if python is None:
        named = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *site.getsitepackages())
        named += (os.path.dirname(os.path.realpath(sys.executable)),)
    else:
        venv = os.path.dirname(os.path.dirname(os.path.abspath(python)))
        named = (venv, os.path.dirname(os.path.realpath(python)), *_venv_home(venv))
    found = {os.path.realpath(p) for p in named if os.path.isdir(p)}
    outer = {p for p in found if not any(q != p and _inside(p, q) for q in found)}
    return tuple(sorted(p for p in outer if p != os.sep and not _inside(p, "/usr")))


def _venv_home(venv: str) -> tuple[str, ...]:
    """The base interpreter's prefix of the virtual environment at `venv` (its pyvenv.cfg's `home`
    is that interpreter's bin folder), or nothing when it has no such file."""
    try:
        lines = Path(venv, "pyvenv.cfg").read_text().splitlines()
    except OSError:
        return ()
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return (os.path.dirname(value.strip()),)
    return ()


@functools.cache
def _view_args(disk_mb: int, python: str | None = None) -> tuple[str, ...]:
    """bwrap arguments for the part of the view every sandbox shares: the system, an empty /tmp
    of `disk_mb` (a memory file system: the sandbox's disk quota), /proc, /dev, the interpreter
    (read-only, at its real paths, linked from the named ones) and the few /etc files."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # merged /usr: /lib -> usr/lib
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    # /tmp first: a bind below (an interpreter under /tmp) must not be covered by it.
    args += ["--size", str(max(disk_mb, 1) << 20), "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    for path in _python_dirs(python):
        args += ["--ro-bind", path, path]
    for named in (sys.prefix, sys.base_prefix) if python is None else ():
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


def _bwrap_command(
    bwrap: str, workdir: str, *, package: bool, disk_mb: int, python: str | None = None
) -> tuple[list[str], list[int]]:
    """The bwrap arguments (ending in `--`) for one sandbox, and the descriptors they read.
    `package`: the whole `trainers` package is visible (trusted imports), else only the child script.
    `workdir` (under /tmp) is made inside the sandbox's own /tmp: no host folder backs it.
    `python`: the interpreter it runs, when not this one (see `_python_dirs`)."""
    code = os.path.join(_project_root(), "trainers") if package else str(CHILD)
    fds = [_data_fd(PASSWD.format(id=SANDBOX_ID, home=workdir)), _data_fd(GROUP.format(id=SANDBOX_ID))]
    args = [bwrap, *BWRAP_FLAGS, *_view_args(disk_mb, python), "--ro-bind", code, code]
    args += ["--ro-bind-data", str(fds[0]), "/etc/passwd", "--ro-bind-data", str(fds[1]), "/etc/group"]
    args += ["--perms", "0700", "--dir", workdir, "--chdir", workdir]
    for path in _hidden_folders(["/usr", *_python_dirs(python), code]):
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
    """One sandbox process and its pipes (requests in, tagged JSON-lines replies out, the log).
    Always `close()` it (kills it; in the weak fallback, deletes its folder).

    `tag` is this process's session tag: the first reply (to the config) and, for a stream of
    replies to one request (`run_program_tests`), every reply carries it. `python`: another
    interpreter to run the child with (a package's own virtual environment); default this one.
    """

    def __init__(self, config: dict[str, Any], python: str | None = None) -> None:
        bwrap = _launcher()  # refuses before anything is made
        self.tag = secrets.token_hex(16)
        self.wrapped = bwrap is not None
        self._host_dir: str | None = None
        command, fds = [python or sys.executable, "-I", str(CHILD)], []
        if bwrap:
            # Exists only inside the sandbox, on its /tmp: the host has nothing there to read or delete.
            self.workdir = f"/tmp/{WORKDIR_PREFIX}{secrets.token_hex(6)}"
            disk_mb = int(config.get("limits", {}).get("disk_mb", Limits.disk_mb))
            prefix, fds = _bwrap_command(
                bwrap, self.workdir, package="import" in config, disk_mb=disk_mb, python=python
            )
            command = prefix + command
            cwd = "/"
        else:
            self.workdir = self._host_dir = cwd = tempfile.mkdtemp(prefix=WORKDIR_PREFIX)
        self._buffer = bytearray()
        self._scanned = 0  # bytes of `_buffer` known to hold no newline
        self._log = bytearray()
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,  # the log: a pipe, drained here, never a file in the sandbox's folder
                bufsize=0,
                cwd=cwd,
                env=_environment(self.workdir),
                start_new_session=True,  # its own process group, so one killpg takes everything it started
                close_fds=True,
                pass_fds=fds,
            )
        finally:
            for fd in fds:
                os.close(fd)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            os.set_blocking(pipe.fileno(), False)  # type: ignore[union-attr]
        with contextlib.suppress(TimeoutError):  # gone or stuck: the first `receive` says which
            self.send({**config, "id": self.tag}, time.monotonic() + STARTUP_GRACE_S)

    # ------------------------------------------------------------------ the pipes

    def _log_fd(self) -> int | None:
        err = self.proc.stderr
        return None if err is None or err.closed else err.fileno()

    def _drain_log(self) -> None:
        """Read what the log pipe holds now (never waits), keeping its tail."""
        fd = self._log_fd()
        while fd is not None:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:  # end of the log: every writer is gone
                assert self.proc.stderr is not None
                self.proc.stderr.close()
                return
            self._log += chunk
            del self._log[:-LOG_KEEP_BYTES]

    def send(self, message: dict[str, Any], deadline: float | None = None) -> bool:
        """Write one message; False when the child is already gone, TimeoutError when it stops
        reading until `deadline` (default: the start-up grace from now). JSON errors of `message`
        (TypeError, ValueError, RecursionError) are raised before anything is written."""
        data = json.dumps(message, default=str).encode() + b"\n"
        deadline = time.monotonic() + STARTUP_GRACE_S if deadline is None else deadline
        assert self.proc.stdin is not None
        fd, view = self.proc.stdin.fileno(), memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            log = self._log_fd()
            readable, writable, _ = select.select([] if log is None else [log], [fd], [], remaining)
            if readable:
                self._drain_log()
            if not writable:
                continue
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
            except OSError:  # BrokenPipeError: the child is gone
                return False
        return True

    def receive(self, deadline: float, tag: str | None = None) -> dict[str, Any] | None:
        """The next reply tagged `tag` (default: the session's), as a dict; None at end of output
        (the child exited); TimeoutError after `deadline`; `MalformedReply` for a tagged line that
        is not a JSON object, or a line longer than `MAX_REPLY_BYTES`. Lines without the tag
        (bytes the sandboxed code wrote onto the pipe) are skipped."""
        assert self.proc.stdout is not None
        want = (tag or self.tag).encode() + b" "
        fd = self.proc.stdout.fileno()
        while True:
            while (end := self._buffer.find(b"\n", self._scanned)) >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._scanned = 0
                if line.startswith(want):
                    return _parse_reply(line[len(want) :])
            self._scanned = len(self._buffer)
            if len(self._buffer) > MAX_REPLY_BYTES:
                raise MalformedReply(f"a reply larger than {MAX_REPLY_BYTES >> 20} MiB")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            log = self._log_fd()
            ready, _, _ = select.select([fd] if log is None else [fd, log], [], [], remaining)
            if log is not None and log in ready:
                self._drain_log()
            if fd not in ready:
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                return None
            self._buffer += chunk

    # ------------------------------------------------------------------ the end

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
        """The last `LOG_TAIL` characters the process wrote to stdout/stderr. Reads what is left in
        the log pipe for at most `DRAIN_AFTER_EXIT_S` (a process it forked may hold the pipe open)."""
        deadline = time.monotonic() + DRAIN_AFTER_EXIT_S
        while (fd := self._log_fd()) is not None and (remaining := deadline - time.monotonic()) > 0:
            if select.select([fd], [], [], remaining)[0]:
                self._drain_log()
        return bytes(self._log).decode("utf-8", "replace").strip()[-LOG_TAIL:]

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.kill()
        if self._host_dir is not None:  # the weak fallback's folder (rmtree does not follow links out of it)
            shutil.rmtree(self._host_dir, ignore_errors=True)


def _parse_reply(payload: bytes) -> dict[str, Any]:
    try:
        message = json.loads(payload)
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too deep, an int of too many digits
        raise MalformedReply(f"a reply that is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise MalformedReply(f"a reply that is a JSON {type(message).__name__}, not an object")
    return message


def _error_text(value: Any) -> str:
    """An error message from the sandbox, as plain text of at most `MAX_ERROR_CHARS`."""
    text = value.encode("utf-8", "replace").decode("utf-8")  # lone surrogates become "?"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


@dataclass
class CallResult:
    """One call into a worker: `value` when ok, else `error`; `crashed` when the worker process is
    gone, `timed_out` when it was killed for taking too long. `value` is plain JSON (dict, list,
    str, int, float, bool, None), of any shape: callers check it."""

    ok: bool
    value: Any = None
    error: str = ""
    crashed: bool = False
    timed_out: bool = False


class Worker:
    """A sandbox process holding one loaded function, answering many calls (one per sample).

    Loading happens once per process: user source is compiled and executed (a syntax error
    or a failing import raises `SandboxError` from `start`, with the line number), or a trusted
    `module:function` is imported. Each `call` has its own wall-clock limit; when it hangs, the
    process dies or its reply is malformed, the result says so (`crashed=True`) and the worker
    must be replaced. Call and close it from the thread that started it: bubblewrap's
    `--die-with-parent` ends the sandbox when that thread exits (the kernel's parent-death
    signal follows the thread).
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
        python: str | None = None,
    ) -> Worker:
        config: dict[str, Any] = {"mode": "worker", "limits": limits.for_child(calls), "function": function}
        if trusted_import:
            config |= {"import": trusted_import, "trusted_import_first": True, "sys_path": [_project_root()]}
        else:
            config |= {"source": source or "", "filename": filename}
        child = SandboxChild(config, python)
        try:
            reply = child.receive(time.monotonic() + limits.load_s + STARTUP_GRACE_S)
        except TimeoutError:
            child.close()
            raise SandboxError(f"loading the code took longer than {limits.load_s:g} s") from None
        except MalformedReply as exc:
            child.close()
            raise SandboxError(f"the sandbox sent {exc} while loading the code") from None
        if reply is None:
            error = child.exit_description()
            child.close()
            raise SandboxError(error)
        if reply.get("ok") is not True:
            child.close()
            error = reply.get("error")
            raise SandboxError(_error_text(error) if isinstance(error, str) else "the code could not be loaded")
        return cls(child, limits)

    def call(self, *args: Any, **kwargs: Any) -> CallResult:
        tag = secrets.token_hex(16)  # the reply must carry it: nothing written before this call can pass for it
        deadline = time.monotonic() + self.limits.timeout_s
        try:
            sent = self._child.send({"id": tag, "args": list(args), "kwargs": kwargs}, deadline)
        except (TypeError, ValueError, RecursionError) as exc:
            return CallResult(False, error=f"the call's arguments cannot be sent to the sandbox: {type(exc).__name__}")
        except TimeoutError:
            return self._timed_out()
        if not sent:
            return CallResult(False, error=self._child.exit_description(), crashed=True)
        try:
            reply = self._child.receive(deadline, tag)
        except TimeoutError:
            return self._timed_out()
        except MalformedReply as exc:
            return self._malformed(str(exc))
        if reply is None:
            return CallResult(False, error=self._child.exit_description(), crashed=True)
        ok, error = reply.get("ok"), reply.get("error")
        if ok is True and "value" in reply:
            return CallResult(True, value=reply["value"])
        if ok is False and isinstance(error, str):
            return CallResult(False, error=_error_text(error))
        return self._malformed("a reply without a boolean 'ok' and its value or error text")

    def _timed_out(self) -> CallResult:
        self._child.kill()
        return CallResult(False, error=f"timed out after {self.limits.timeout_s:g} s", crashed=True, timed_out=True)

    def _malformed(self, what: str) -> CallResult:
        """The process no longer speaks the protocol (its own functions were rebound): it is stopped."""
        self._child.kill()
        return CallResult(False, error=f"the sandbox sent {what}; its process was stopped", crashed=True)

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
