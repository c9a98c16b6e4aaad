"""A run's `tools` environment for the playground, on the model server's side (hf_server's
POST /studio/tools/start and /studio/tools/step): the same ToolsEnvironment, limits and sandbox as
training, so a call the model makes in the playground runs as it ran while it trained, on the worker,
never in the web process.

start: the episode's first messages (the environment's system message listing the tools, then the
conversation), its stop strings and turn limits. step: one model turn's text through the environment's
own `step` (its parser, its tools, its bounds on each result): each call with its result, and whether
the turn was the final answer. The environment is made afresh for each request (the studio holds no
process state between turns): tools that keep state between calls in one episode (the python tool's
variables) start clean on each turn here.
Plain Python and the trainer: no Django here.
"""

from __future__ import annotations

from typing import Any

from trainers.rollout.environments import bounds
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds import ENVIRONMENTS  # importing the package registers the built-in kinds
from trainers.spec import EnvironmentSpec

TOOLS_KIND = "tools"


def _environment(section: Any):
    """(the environment, its spec); ValueError (the 400 the studio shows) for anything but a tools one."""
    spec = EnvironmentSpec.model_validate(section)  # a ValidationError is a ValueError
    if spec.kind != TOOLS_KIND:
        raise ValueError(f"environment: a {spec.kind!r} environment has no tools to call")
    return ENVIRONMENTS.get(spec.kind).create(spec.params, EpisodeLimits.of(spec)), spec


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError("body: a JSON object")
    return body


def start(body: dict[str, Any]) -> dict[str, Any]:
    """{"messages": the episode's first messages, "stop": [...], "max_turns", "max_turn_tokens"}."""
    _object(body)
    env, spec = _environment(body.get("environment"))
    try:
        begun = bounds.start(env.reset({"messages": list(body.get("messages") or [])}))
        stops = [bounds.short(s, bounds.MAX_NAME_CHARS, "a stop string") for s in env.stop_strings()][:16]
    finally:
        env.close()
    return {"messages": list(begun.messages), "stop": stops, "max_turns": spec.max_turns,
            "max_turn_tokens": spec.max_turn_tokens}  # fmt: skip


def step(body: dict[str, Any]) -> dict[str, Any]:
    """{"calls": [{name, arguments, result, error, truncated}], "observation": [tool messages],
    "done": whether the turn was the final answer, "reason": the environment's words}."""
    text = _object(body).get("text")
    if not isinstance(text, str):
        raise ValueError("text: the model's turn, as text")
    env, spec = _environment(body.get("environment"))
    try:
        result = bounds.step_result(env.step(text), EpisodeLimits.of(spec))  # as training bounds it
    finally:
        env.close()
    calls = [{"name": c.name, "arguments": c.arguments, "result": c.result, "error": c.error,
              "truncated": c.truncated} for c in result.tool_calls]  # fmt: skip
    return {"calls": calls, "observation": list(result.observation), "done": bool(result.done), "reason": result.reason}
