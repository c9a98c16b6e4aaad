"""tools: the model calls tools (a Python interpreter, a calculator, search, user functions)
until it answers.

`reset` puts a system message first that lists the tools' schemas the way Qwen's chat template
does (`<tools>` with one JSON schema a line, then how to write a `<tool_call>`). After each turn,
`step` parses the calls (`tool_calls.parse_tool_calls`, in the formats chosen), runs them in
order and returns one `tool` message per call, cut to `max_observation_chars`. Whatever the
model got wrong (a malformed call, an unknown tool, bad arguments) and whatever the tool did (it
raised, hung, blew its memory, printed megabytes) becomes that call's message and
`ToolCall.error`; the episode goes on. A turn without a tool call is the final answer.

The state after a turn (GiGPO groups on it) is a hash of every call and result so far: two
episodes that called the same tools with the same arguments and saw the same results are in
the same state.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from trainers.episodes import Message, ToolCall
from trainers.rollout.environments import bounds
from trainers.rollout.environments.base import ENVIRONMENTS, Environment, EnvironmentStart, EpisodeLimits, StepResult
from trainers.rollout.environments.catalog import TOOLS_PLACEHOLDER, ToolsParams
from trainers.rollout.environments.tool_calls import parse_tool_calls
from trainers.rollout.environments.tools import TOOLS, Clipped, Tool, ToolError
from trainers.rollout.environments.tools.sandboxed import MAX_CALLS_PER_TURN

PYTHON_FENCE_NOTE = "To run Python code, you may also write it in a ```python fenced block: the python tool runs it."


@ENVIRONMENTS.register("tools")
class ToolsEnvironment(Environment):
    params_model = ToolsParams
    params: ToolsParams

    def __init__(self, params: ToolsParams, limits: EpisodeLimits) -> None:
        super().__init__(params, limits)
        self.tools: list[Tool] = [TOOLS.get(c.kind).create(c.params, limits) for c in params.tools]
        self.by_name = {s["function"]["name"]: tool for tool in self.tools for s in tool.schemas()}
        self.history: list[list[Any]] = []  # [name, arguments, result] of every call so far

    def system_message(self) -> str:
        schemas = "\n".join(json.dumps(s, ensure_ascii=False) for tool in self.tools for s in tool.schemas())
        text = self.params.tools_prompt.replace(TOOLS_PLACEHOLDER, schemas)
        return f"{text}\n\n{PYTHON_FENCE_NOTE}" if "python" in self.params.formats else text

    def reset(self, row: dict[str, Any]) -> EnvironmentStart:
        messages: list[Message] = list(row.get("messages", []))
        intro = self.params.system_prompt
        if messages and messages[0].get("role") == "system":
            intro, messages = str(messages[0].get("content", "")), messages[1:]
        system = {"role": "system", "content": f"{intro}\n\n{self.system_message()}".strip()}
        return EnvironmentStart(messages=[system, *messages], state=self.state())

    def stop_strings(self) -> list[str]:
        # The model waits for a Hermes call's result; a fenced block has no closing mark distinct
        # from its opening one, so python-format turns end at EOS and every block in them runs.
        return ["</tool_call>"] if "hermes" in self.params.formats else []

    def step(self, text: str) -> StepResult:
        calls = parse_tool_calls(text, self.params.formats)
        if not calls:
            return self.final(text)
        for i, call in enumerate(calls):
            if i < MAX_CALLS_PER_TURN:
                self.run(call)
            else:
                call.error = f"not run: at most {MAX_CALLS_PER_TURN} tool calls per turn"
                call.result = f"error: {call.error}"
            self.history.append([call.name, call.arguments, call.result])
        observation = [{"role": "tool", "name": c.name, "content": c.result} for c in calls]
        failed = sum(c.error is not None for c in calls)
        reason = f"{len(calls)} tool call{'s' if len(calls) > 1 else ''}" + (f", {failed} failed" if failed else "")
        return StepResult(observation=observation, reason=reason, tool_calls=calls, state=self.state())

    def final(self, text: str) -> StepResult:
        if self.params.answer == "answer_tag":
            # Linear: an opening tag with a closing one after it (a regex's lazy `.*?` rescans the
            # rest of the turn from every opening tag: quadratic on a turn of repeated tags).
            tag = self.params.answer_tag
            opened = text.find(f"<{tag}>")
            if opened < 0 or text.find(f"</{tag}>", opened + len(tag) + 2) < 0:
                return StepResult(
                    done=True, reason=f"no tool call and no <{self.params.answer_tag}>", state=self.state()
                )
        return StepResult(done=True, answered=True, reason="answered", state=self.state())

    def run(self, call: ToolCall) -> None:
        """Run one call, filling in its result, error, time and whether the result was cut."""
        started = time.monotonic()
        out: str | Clipped
        if call.error:  # malformed: the parser said why
            out = f"error: {call.error}"
        elif call.name not in self.by_name:
            call.error = f"unknown tool {call.name!r}; available: {', '.join(self.by_name)}"
            out = f"error: {call.error}"
        else:
            try:
                out = self.by_name[call.name].call(call.name, call.arguments)
            except ToolError as exc:
                call.error = str(exc)
                out = exc.shown if exc.shown is not None else f"error: {exc}"
            except Exception as exc:  # a bug in a built-in tool: the model is told, the episode goes on
                call.error = f"the tool failed: {type(exc).__name__}: {exc}"
                out = f"error: {call.error}"
        text, more = (out.text, out.more) if isinstance(out, Clipped) else (out, 0)
        if not isinstance(text, str) or not isinstance(more, int):  # a tool's bug: what it gave is not read
            call.error = f"the tool failed: it returned a {type(text).__name__}, not text"
            text, more = f"error: {call.error}", 0
        call.result, call.truncated = bounds.text(text, self.limits.max_observation_chars, "the tool's result", more)
        call.seconds = time.monotonic() - started

    def state(self) -> str:
        encoded = json.dumps(self.history, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def close(self) -> None:
        for tool in self.tools:
            tool.close()
