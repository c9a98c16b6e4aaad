"""python: a Python interpreter in the sandbox, its variables and imports kept across the turns
of one episode (one worker per episode, started on the first call).

The model sees what the cell printed (stdout and stderr together) and the repr of a last bare
expression, as in a notebook; an exception shows the traceback's last lines. A cell that hangs
or kills the process (os._exit, memory) is cut off; the next call gets a fresh interpreter, and
the model is told its variables are gone.
"""

from __future__ import annotations

from typing import Any

from trainers.rollout.environments.catalog import PythonToolParams
from trainers.rollout.environments.tools.base import TOOLS, Clipped, FunctionTool, ToolError
from trainers.rollout.environments.tools.sandboxed import INTERPRETER, EpisodeSandbox

NOTE_ROOM = 40  # characters kept free for the note saying how much output was cut
RESTARTED = "[the interpreter was stopped: earlier variables and imports are gone]"


@TOOLS.register("python")
class Python(FunctionTool):
    params_model = PythonToolParams
    name = PythonToolParams.offers
    description = (
        "Run Python code in a stateful interpreter (variables and imports persist between calls). "
        "Returns what it printed and the value of the last expression."
    )
    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python statements to run."}},
        "required": ["code"],
    }
    _sandbox: EpisodeSandbox | None = None

    def run(self, arguments: dict[str, Any]) -> Clipped:
        if self._sandbox is None:
            self._sandbox = EpisodeSandbox(INTERPRETER.read_text(), "run", self.limits, filename="<interpreter>")
        outcome = self._sandbox.call(arguments["code"], self.limits.max_observation_chars)
        if not outcome.ok:
            shown = Clipped(f"error: {outcome.error}\n{RESTARTED}") if outcome.crashed else None
            raise ToolError(outcome.error, shown=shown)
        reply = outcome.value
        if reply["error"]:
            raise ToolError(reply["error"], shown=self._with_traceback(reply))
        return Clipped(reply["output"], reply["dropped"])

    def _with_traceback(self, reply: dict[str, Any]) -> Clipped:
        """The output, then the traceback; when they do not fit, the output is cut, not the
        traceback's end (the error is what the model most needs to read)."""
        limit = self.limits.max_observation_chars
        tb = reply["traceback"][-max(limit - NOTE_ROOM, limit // 2) :]
        room = max(limit - len(tb) - NOTE_ROOM, 0)
        output = reply["output"]
        more = reply["dropped"] + max(len(output) - room, 0)
        cut = f"{output[:room]}\n[truncated: {more} more characters]\n" if more else output
        return Clipped(cut + tb)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
