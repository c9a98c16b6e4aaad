"""The source a `python` tool's sandbox worker loads: a REPL whose variables and imports last as
long as the worker (one episode). Read as text and sent to the sandbox, never imported by the
studio; standard library only (it runs under `python -I`).

`run(code, limit)` executes one cell like a notebook: the statements, then the value of a last
bare expression (its repr, unless None). stdout and stderr are captured, keeping the first
`limit` characters and counting the rest, so a cell printing megabytes costs a counter, not a
pipe full of text. What the cell writes to the descriptors themselves (`os.write(1, ...)`, a
subprocess) goes to a file of the sandbox's own /tmp for the cell's time and comes back after the
printed text, its start kept and the rest counted the same way (past the sandbox's file-size limit
the write fails, and the cell's error says so). An exception, SystemExit included, gives the traceback's last lines,
returned apart from the output so that the caller can keep its end (the error) whole.
"""

import ast
import contextlib
import io
import linecache
import os
import sys
import tempfile
import traceback

NAMESPACE = {"__name__": "__main__"}
TRACEBACK_LINES = 12
CELLS = [0]


class Capped(io.TextIOBase):
    def __init__(self, limit):
        self.limit = limit
        self.parts = []
        self.size = 0
        self.dropped = 0

    def writable(self):
        return True

    def write(self, text):
        room = max(self.limit - self.size, 0)
        kept = text[:room]
        self.parts.append(kept)
        self.size += len(kept)
        self.dropped += len(text) - len(kept)
        return len(text)


def run(code, limit):
    CELLS[0] += 1
    filename = f"<cell {CELLS[0]}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # tracebacks show the lines
    out = Capped(limit)
    saved = sys.stdout, sys.stderr
    kept_fds = os.dup(1), os.dup(2)
    # The descriptors' output: an unnamed file (never a pipe that fills), open only as fds 1 and 2 while
    # the cell runs, so the cell's writes to other descriptors cannot land in it.
    with tempfile.TemporaryFile() as raw:
        os.dup2(raw.fileno(), 1)
        os.dup2(raw.fileno(), 2)
    sys.stdout = sys.stderr = out
    error = traceback_text = None
    try:
        tree = ast.parse(code, filename, "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, filename, "exec"), NAMESPACE)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), filename, "eval"), NAMESPACE)
            if value is not None:
                print(repr(value))
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the cell failed, the REPL goes on
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        shown = traceback.TracebackException.from_exception(exc)
        shown.stack = traceback.StackSummary.from_list([f for f in shown.stack if f.filename.startswith("<cell")])
        lines = "".join(shown.format()).rstrip().splitlines()
        traceback_text = "\n".join(lines[-TRACEBACK_LINES:]) + "\n"
    finally:
        sys.stdout, sys.stderr = saved
        for stream in (sys.__stdout__, sys.__stderr__):  # their buffers belong to this cell's output
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        raw = os.dup(1)
        os.dup2(kept_fds[0], 1)
        os.dup2(kept_fds[1], 2)
        os.close(kept_fds[0])
        os.close(kept_fds[1])
    raw_output(raw, out)
    return {"output": "".join(out.parts), "dropped": out.dropped, "error": error, "traceback": traceback_text}


def raw_output(fd, out):
    """Add what the descriptors got (the file open as `fd`, closed here) to `out`: the start that fits
    its room (at most 4 bytes a character are read), the rest counted, in bytes, as dropped."""
    try:
        size = os.fstat(fd).st_size
        room = max(out.limit - out.size, 0)
        if size:
            os.lseek(fd, 0, os.SEEK_SET)
            text = os.read(fd, room * 4).decode("utf-8", "replace")[:room]
            out.write(text)
            out.dropped += size - len(text.encode("utf-8", "replace"))
    finally:
        os.close(fd)
