"""The program a sandbox process runs (standard library only: it starts under `python -I`).

It takes over the pipes the parent gave it as stdin/stdout for its own protocol (one JSON
object per line in; out, `<tag> <json>` on a line of its own, the tag the request's `id`),
points fd 0 at /dev/null and fd 1 at the stderr log (a pipe the parent drains), applies
resource limits, blocks `socket`, and then serves one of two modes named by the first message.
What it can see and do beyond that (files, network, user) is set up around it by the parent,
`trainers.sandbox.process`.

User code in `worker` mode shares this process, so it can reach the protocol's pipes and this
module's functions: the parent trusts nothing of what comes back (it checks tags, sizes and
shapes). A request's tag is random and new, so nothing written before it can answer it.

- `worker`: load a function once (user source, or `module:function` for trusted code), then
  answer `{"args": [...], "kwargs": {...}}` requests with `{"ok": true, "value": ...}` or
  `{"ok": false, "error": "..."}` until stdin closes. Exceptions, including SystemExit, are
  answers, not crashes; only a dying process (os._exit, segfault, kill) ends the worker.
- `tests`: compile a program once and run it against test cases, each in a forked child,
  writing one result line per test as soon as it is known (so a parent that kills this
  process on timeout still has the results so far). Here the program runs only in the forked
  children, which close the protocol's pipes first, and this process is made non-dumpable
  (its /proc/<pid>/fd is closed to them): the program cannot write a line the parent reads.
  A stdio test's verdict is decided here, from the output the child sends back.
"""

import errno
import json
import os
import resource
import sys
import time
import traceback

MAX_TEXT = 300
MAX_ERROR = 2000  # characters of an error message
MAX_REPLY_BYTES = 8 << 20  # as the parent's limit: a larger value is answered with an error instead
# What a stdio test reads back of the program's output: as JSON (12 bytes a character at most, an
# escaped surrogate pair) it stays within a reply.
MAX_STDOUT_BYTES = MAX_REPLY_BYTES // 16
PR_SET_DUMPABLE = 4
# Bound before user code runs: code that rebinds `json.dumps` or `os.write` does not change these.
_dumps = json.dumps
_write = os.write
_loads = json.loads


def main():
    proto_fds = (os.dup(0), os.dup(1))
    proto_in = os.fdopen(proto_fds[0], "r", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115  (lives as long as the process)
    sys.stdout = sys.stderr
    out_fd = proto_fds[1]

    def send(message, tag):
        try:
            data = _dumps(message, default=str)
        except BaseException as exc:  # a circular or too deep value, a default= that raised
            data = _dumps({"ok": False, "error": "the value cannot be sent back: " + describe(exc)})
        if len(data) > MAX_REPLY_BYTES:
            data = _dumps({"ok": False, "error": f"the value is {len(data)} bytes as JSON, more than a reply holds"})
        # The newline first ends any partial line user code left on the pipe.
        view = memoryview(("\n" + tag + " " + data + "\n").encode())
        while view:
            view = view[_write(out_fd, view) :]

    config = _loads(proto_in.readline())
    tag = str(config.get("id", ""))
    sys.path[:0] = config.get("sys_path", [])
    if config["mode"] == "worker":
        serve(config, proto_in, send, tag)
    else:
        run_tests(config, lambda message: send(message, tag), proto_fds)


def apply_limits(limits):
    """Address space, CPU seconds, written file size and core dumps; set here, just before
    untrusted code runs, so the interpreter's start-up is not squeezed by them (its CPU seconds
    still count: RLIMIT_CPU is the process's total)."""
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def block_network():
    """Best effort inside Python (ctypes or `_socket` can get around it): the real barrier is the
    empty network namespace bubblewrap starts this process in; this is all the weak fallback has."""
    import socket

    def refuse(*args, **kwargs):
        raise PermissionError("network access is disabled in the sandbox")

    socket.socket = refuse
    socket.create_connection = refuse
    socket.socketpair = refuse
    socket.getaddrinfo = refuse


def describe(exc):
    try:
        text = str(exc)
        name = type(exc).__name__
    except BaseException:  # an exception whose __str__ raises
        text, name = "", "an exception that cannot be shown"
    text = text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 3] + "..."
    return f"{name}: {text}" if text else name


def user_frame_error(exc, filename):
    """`ValueError: bad (line 3)`: the message plus the deepest line of the user's own code."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = f" (line {lines[-1]})" if lines else ""
    return describe(exc) + where


def syntax_error(exc):
    line = (exc.text or "").strip()
    shown = f": {line[:80]}" if line else ""
    return f"SyntaxError at line {exc.lineno}: {exc.msg}{shown}"


def load_function(config):
    if "import" in config:
        module_name, _, function_name = config["import"].partition(":")
        module = __import__(module_name, fromlist=[function_name])
        return getattr(module, function_name)
    filename = config.get("filename", "<user code>")
    try:
        code = compile(config["source"], filename, "exec")
    except SyntaxError as exc:
        raise RuntimeError(syntax_error(exc)) from None
    namespace = {"__name__": "__sandbox__"}
    try:
        exec(code, namespace)
    except BaseException as exc:
        raise RuntimeError("error while loading the code: " + user_frame_error(exc, filename)) from None
    function = namespace.get(config["function"])
    if not callable(function):
        raise RuntimeError(f"the code defines no function {config['function']}()")
    return function


def serve(config, proto_in, send, tag):
    if config.get("trusted_import_first") and "import" in config:
        # Trusted modules are imported before the limits so their own start-up is not squeezed.
        function = load_function(config)
        apply_limits(config["limits"])
    else:
        apply_limits(config["limits"])
        block_network()
        try:
            function = load_function(config)
        except RuntimeError as exc:
            send({"ok": False, "error": str(exc)}, tag)
            return
    send({"ok": True, "ready": True}, tag)
    filename = config.get("filename", "<user code>")
    for line in proto_in:
        request = _loads(line)
        reply_tag = str(request.get("id", ""))
        try:
            value = function(*request.get("args", []), **request.get("kwargs", {}))
            message = {"ok": True, "value": value}
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: an answer, not a crash
            try:
                message = {"ok": False, "error": user_frame_error(exc, filename)}
            except BaseException as inner:  # the traceback machinery itself was broken by the code
                message = {"ok": False, "error": describe(inner)}
        send(message, reply_tag)


def run_tests(config, send, proto_fds):
    make_undumpable()
    apply_limits(config["limits"])
    block_network()
    filename = "<completion>"
    try:
        code = compile(config["code"], filename, "exec")
    except SyntaxError as exc:
        send({"fatal": syntax_error(exc)})
        return
    deadline = time.monotonic() + config["timeout_s"]
    tests = config["tests"]
    for i, test in enumerate(tests):
        if time.monotonic() > deadline:
            send({"test": i, "passed": False, "error": "not run: the time limit was used up"})
            continue
        if config["style"] == "asserts":
            result = run_forked(lambda test=test: exec_assert(code, test, filename), deadline, proto_fds)
            if "fatal" in result:
                send({"fatal": str(result["fatal"])})
                return
        else:
            result = run_forked(lambda test=test, i=i: exec_stdio(code, test["input"], i), deadline, proto_fds)
            if "stdout" in result:
                result = stdio_verdict(result, test["output"], config["limits"]["file_size_mb"])
        send(result | {"test": i})


def make_undumpable():
    """No other process of the sandbox (the forked tests) may open this one's /proc/<pid>/fd or
    trace it. Best effort: without ctypes the tests still run."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except Exception:  # noqa: BLE001
        pass


def exec_assert(code, test, filename):
    """The program, then one test, in a fresh namespace (in the forked child)."""
    namespace = {"__name__": "__main__"}
    try:
        exec(code, namespace)
    except BaseException as exc:
        return {"fatal": "the program failed before the tests: " + user_frame_error(exc, filename)}
    exec(compile(test, "<test>", "exec"), namespace)
    return {"passed": True}


def exec_stdio(code, stdin_text, index):
    """Run the program (in a forked child) with the test input on fd 0 and fd 1 in a file, so
    `input()`, `sys.stdin.buffer`, `print` and `os.write(1, ...)` all behave as in a real run.
    Returns the start of what it printed (`MAX_STDOUT_BYTES`), how many bytes it printed, and whether
    a write failed at the file-size limit; the parent compares it with the expected output."""
    in_path, out_path = f".stdin-{index}", f".stdout-{index}"
    with open(in_path, "w", encoding="utf-8") as f:
        f.write(stdin_text)
    os.dup2(os.open(in_path, os.O_RDONLY), 0)
    os.dup2(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    at_limit = False
    try:
        exec(code, {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    except OSError as exc:  # a write past RLIMIT_FSIZE: the output is cut there, which the verdict says
        if exc.errno != errno.EFBIG:
            raise
        at_limit = True
    finally:
        try:
            sys.stdout.flush()
        except OSError as exc:
            if exc.errno != errno.EFBIG:
                raise
            at_limit = True
    with open(out_path, "rb") as f:
        head = f.read(MAX_STDOUT_BYTES)
        size = os.fstat(f.fileno()).st_size
    return {"stdout": head.decode("utf-8", "replace"), "bytes": size, "kept": len(head), "at_limit": at_limit}


def stdio_verdict(result, expected, file_size_mb):
    """A stdio test's result from what `exec_stdio` read back: passed when the whole output matches.
    Output cut (at the file-size limit, or longer than is read back) fails, and the error says where it
    was cut and how much was kept."""
    got, size, kept = str(result["stdout"]), int(result["bytes"]), int(result["kept"])
    out = {"passed": False, "got": got[:MAX_TEXT]}
    if result.get("at_limit") or size >= file_size_mb << 20:
        out["error"] = (f"the output was cut at the sandbox's file-size limit ({file_size_mb} MiB): "
                        f"{size:,} bytes written, the first {kept:,} kept")  # fmt: skip
    elif kept < size:
        out["error"] = f"the output was cut: {size:,} bytes, more than a test reads back; the first {kept:,} kept"
    else:
        out["passed"] = same_output(got, expected)
    return out


def same_output(got, expected):
    """Equal up to trailing whitespace on each line and blank lines at the end."""

    def lines(text):
        return [line.rstrip() for line in text.rstrip().splitlines()]

    return lines(got) == lines(expected)


def run_forked(test_fn, deadline, proto_fds):
    """Run one test in a forked child (tests cannot disturb each other); wait until `deadline`.
    The child closes the protocol's pipes before the program runs."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        for fd in proto_fds:
            os.close(fd)
        try:
            result = test_fn()
        except BaseException as exc:
            result = {"passed": False, "error": user_frame_error(exc, "<completion>")}
        with os.fdopen(write_fd, "w") as out:
            out.write(_dumps(result, default=str))
        os._exit(0)
    os.close(write_fd)
    delay = 0.0005
    chunks = []
    os.set_blocking(read_fd, False)
    while True:
        drain(read_fd, chunks)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(read_fd)
            return {"passed": False, "error": "timed out"}
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
    drain(read_fd, chunks)
    os.close(read_fd)
    text = b"".join(chunks)[:MAX_REPLY_BYTES].decode("utf-8", "replace")
    if not text:
        return {"passed": False, "error": exit_text(status)}
    try:
        result = _loads(text)
    except ValueError:
        result = None
    if not isinstance(result, dict):
        return {"passed": False, "error": "the test's process sent back something unreadable"}
    return result


def drain(fd, chunks):
    """Read what the pipe holds now (the child may write more than a pipe's buffer)."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            return
        if sum(map(len, chunks)) < MAX_REPLY_BYTES:  # past that, read and dropped
            chunks.append(chunk)


def exit_text(status):
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exited with code {os.WEXITSTATUS(status)}"


if __name__ == "__main__":
    main()
