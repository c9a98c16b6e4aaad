"""python: a Python interpreter in the sandbox, its variables and imports kept across the turns
of one episode (one worker per episode, started on the first call).

The model sees what the cell printed (stdout and stderr together) and the repr of a last bare
expression, as in a notebook; an exception shows the traceback's last lines. A cell that hangs
or kills the process (os._exit, memory) is cut off; the next call gets a fresh interpreter, and
the model is told its variables are gone.

The interpreter shares its process with the model's code, which can rebind its helpers: the
reply is checked here (a dict of exact text and counts, each cut to the observation limit), and
one that is not ends that call with the reason; the next call goes on.
"""

from __future__ import annotations

from typing import Any

from trainers.rollout.environments.catalog import PythonToolParams
from trainers.rollout.environments.tools.base import TOOLS, Clipped, FunctionTool, ToolError
from trainers.rollout.environments.tools.sandboxed import (
    INTERPRETER,
    EpisodeSandbox,
    MalformedValue,
    reply_count,
    reply_text,
)

NOTE_ROOM = 48  # characters kept free for the note saying how much output was cut
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
        try:
            reply = self._checked(outcome.value)
        except MalformedValue as exc:  # its own functions were rebound: a fresh interpreter takes the next call
            self.close()
            error = f"the interpreter's reply was malformed: {exc}"
            raise ToolError(error, shown=Clipped(f"error: {error}\n{RESTARTED}")) from None
        if reply["error"]:
            raise ToolError(reply["error"], shown=self._with_traceback(reply))
        return Clipped(reply["output"], reply["dropped"])

    def _checked(self, value: Any) -> dict[str, Any]:
        """The interpreter's reply as {output: str, dropped: int, error: str | None, traceback: str},
        each text cut to the observation limit."""
        limit = self.limits.max_observation_chars
        if type(value) is not dict:
            raise MalformedValue(f"a {type(value).__name__}, not a dict")
        output = reply_text(value.get("output"), limit, "the output")
        dropped = reply_count(value.get("dropped"), "the count of dropped characters")
        dropped += max(len(value["output"]) - limit, 0)
        error = value.get("error")
        if error is None or error == "":
            return {"output": output, "dropped": dropped, "error": None, "traceback": ""}
        error = reply_text(error, limit, "the error")
        traceback = reply_text(value.get("traceback"), limit, "the traceback", keep_end=True)
        return {"output": output, "dropped": dropped, "error": error, "traceback": traceback}

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
