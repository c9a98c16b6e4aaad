"""The program a sandbox process runs (standard library only: it starts under `python -I`).

It takes over the pipes the parent gave it as stdin/stdout for its own protocol (one JSON
object per line), points fd 0 at /dev/null and fd 1 at the stderr log so user code can
neither read the protocol nor write into it, applies resource limits, blocks `socket`,
and then serves one of two modes named by the first message. What it can see and do beyond
that (files, network, user) is set up around it by the parent, `trainers.sandbox.process`.

- `worker`: load a function once (user source, or `module:function` for trusted code), then
  answer `{"args": [...], "kwargs": {...}}` requests with `{"ok": true, "value": ...}` or
  `{"ok": false, "error": "..."}` until stdin closes. Exceptions, including SystemExit, are
  answers, not crashes; only a dying process (os._exit, segfault, kill) ends the worker.
- `tests`: compile a program once and run it against test cases, each in a forked child,
  writing one result line per test as soon as it is known (so a parent that kills this
  process on timeout still has the results so far).
"""

import json
import os
import resource
import sys
import time
import traceback

MAX_TEXT = 300


def main():
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115  (lives as long as the process)
    sys.stdout = sys.stderr

    def send(message):
        proto_out.write(json.dumps(message, default=str) + "\n")
        proto_out.flush()

    config = json.loads(proto_in.readline())
    sys.path[:0] = config.get("sys_path", [])
    if config["mode"] == "worker":
        serve(config, proto_in, send)
    else:
        run_tests(config, send)


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
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


def serve(config, proto_in, send):
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
            send({"ok": False, "error": str(exc)})
            return
    send({"ok": True, "ready": True})
    filename = config.get("filename", "<user code>")
    for line in proto_in:
        request = json.loads(line)
        try:
            value = function(*request.get("args", []), **request.get("kwargs", {}))
            send({"ok": True, "value": value})
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: an answer, not a crash
            send({"ok": False, "error": user_frame_error(exc, filename)})


def run_tests(config, send):
    apply_limits(config["limits"])
    block_network()
    filename = "<completion>"
    try:
        code = compile(config["code"], filename, "exec")
    except SyntaxError as exc:
        send({"fatal": syntax_error(exc)})
        return
    deadline = time.monotonic() + config["timeout_s"]
    if config["style"] == "asserts":
        namespace = {"__name__": "__main__"}
        try:
            exec(code, namespace)
        except BaseException as exc:
            send({"fatal": "the program failed before the tests: " + user_frame_error(exc, filename)})
            return
        runners = [lambda test=test: exec_assert(test, namespace) for test in config["tests"]]
    else:
        runners = [lambda test=test, i=i: exec_stdio(code, test, i) for i, test in enumerate(config["tests"])]
    for i, runner in enumerate(runners):
        if time.monotonic() > deadline:
            send({"test": i, "passed": False, "error": "not run: the time limit was used up"})
        else:
            send(run_forked(runner, deadline) | {"test": i})


def exec_assert(test, namespace):
    exec(compile(test, "<test>", "exec"), dict(namespace))
    return {"passed": True}


def exec_stdio(code, test, index):
    """Run the program (in a forked child) with the test input on fd 0 and fd 1 in a file, so
    `input()`, `sys.stdin.buffer`, `print` and `os.write(1, ...)` all behave as in a real run."""
    in_path, out_path = f".stdin-{index}", f".stdout-{index}"
    with open(in_path, "w", encoding="utf-8") as f:
        f.write(test["input"])
    os.dup2(os.open(in_path, os.O_RDONLY), 0)
    os.dup2(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    try:
        exec(code, {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    finally:
        sys.stdout.flush()
    with open(out_path, encoding="utf-8", errors="replace") as f:
        got = f.read()
    return {"passed": same_output(got, test["output"]), "got": got[:MAX_TEXT]}


def same_output(got, expected):
    """Equal up to trailing whitespace on each line and blank lines at the end."""

    def lines(text):
        return [line.rstrip() for line in text.rstrip().splitlines()]

    return lines(got) == lines(expected)


def run_forked(test_fn, deadline):
    """Run one test in a forked child (tests cannot disturb each other); wait until `deadline`."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            result = test_fn()
        except BaseException as exc:
            result = {"passed": False, "error": user_frame_error(exc, "<completion>")}
        with os.fdopen(write_fd, "w") as out:
            out.write(json.dumps(result, default=str))
        os._exit(0)
    os.close(write_fd)
    delay = 0.0005
    while True:
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
    with os.fdopen(read_fd) as data:
        text = data.read()
    if not text:
        return {"passed": False, "error": exit_text(status)}
    return json.loads(text)


def exit_text(status):
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exited with code {os.WEXITSTATUS(status)}"


if __name__ == "__main__":
    main()
