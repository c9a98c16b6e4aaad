"""The system prompt a tools environment starts from: it names the tools offered, what each is for,
and the answer format, as the demos' prompts do ("Use the calculator for arithmetic, then answer
with the number only."). A bare "You are a helpful assistant." left a small model guessing how to
answer: a newcomer's calculator agent learned nothing with it (issue 39).

Imports no runtime code: the studio's environment editor offers this text (studio.environments.api).
"""

from __future__ import annotations

from typing import Any

from trainers.rollout.environments.catalog import TOOL_KINDS, ToolsParams

OPENING = "You are a helpful assistant."
DEFAULT = ToolsParams.model_fields["system_prompt"].default
ANY_ANSWER = "the answer only"


def suggested_system_prompt(tools: list[Any], answer: str = "no_tool_call", answer_tag: str = "answer") -> str:
    """The system prompt for these tools ({"kind", "params"} entries, as in a tools config) and answer
    mode; entries that are not a valid tool are left out (the form says why beside the tools), and
    with none left it is the schema's default."""
    chosen = [tool for tool in map(_tool, tools) if tool is not None]
    if not chosen:
        return DEFAULT
    uses = list(dict.fromkeys(tool.prompt_use() for tool in chosen))
    shapes = {tool.answer_shape for tool in chosen if tool.answer_shape}
    shape = shapes.pop() if len(shapes) == 1 else ANY_ANSWER
    listed = uses[0] if len(uses) == 1 else f"{', '.join(uses[:-1])} and {uses[-1]}"
    if answer == "answer_tag":
        ending = f"then give {shape} inside <{answer_tag}></{answer_tag}>."
    else:
        ending = f"then answer with {shape}."
    return f"{OPENING} Use {listed}, {ending}"


def _tool(entry: Any):
    """The entry as its tool kind's params model; None for anything that is not one."""
    if isinstance(entry, str):
        entry = {"kind": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str) or entry["kind"] not in TOOL_KINDS:
        return None
    params = entry.get("params") or {}
    try:
        return TOOL_KINDS.get(entry["kind"]).model_validate(params)
    except ValueError:  # pydantic's ValidationError is one: a bad functions source, a missing setting
        return None
