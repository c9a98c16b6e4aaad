"""The source a `python` tool's sandbox worker loads: a REPL whose variables and imports last as
long as the worker (one episode). Read as text and sent to the sandbox, never imported by the
studio; standard library only (it runs under `python -I`).

`run(code, limit)` executes one cell like a notebook: the statements, then the value of a last
bare expression (its repr, unless None). stdout and stderr are captured, keeping the first
`limit` characters and counting the rest, so a cell printing megabytes costs a counter, not a
pipe full of text. An exception, SystemExit included, gives the traceback's last lines,
returned apart from the output so that the caller can keep its end (the error) whole.
"""

import ast
import io
import linecache
import sys
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
    return {"output": "".join(out.parts), "dropped": out.dropped, "error": error, "traceback": traceback_text}
