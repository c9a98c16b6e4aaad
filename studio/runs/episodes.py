"""A multi-turn rollout's turns (each `trainers.episodes.Turn.to_dict()`) and the columns the
inspector filters on, derived from them once when the rollout is written.

Tool names are stored in one text column as `,name,name,` (sorted, each once): `?tool=x` is then
`LIKE '%,x,%'`, which SQLite and PostgreSQL read alike, with no JSON containment (SQLite has none)
and no side table to join. Names lose any comma so the delimiter stays unambiguous.
"""

from __future__ import annotations

from typing import Any

# end_reason values that mean a limit of EnvironmentSpec stopped the episode, not the environment.
LIMIT_END_REASONS = ("turn_limit", "token_budget")
TOOL_SEPARATOR = ","


def tool_name(name: Any) -> str:
    return str(name).replace(TOOL_SEPARATOR, "")


def pack_tools(names: list[str]) -> str:
    """`,a,b,` for the tools a rollout used (empty for none): the column `?tool=` matches."""
    unique = sorted({tool_name(n) for n in names if tool_name(n)})
    return f"{TOOL_SEPARATOR}{TOOL_SEPARATOR.join(unique)}{TOOL_SEPARATOR}" if unique else ""


def unpack_tools(packed: str) -> list[str]:
    return [name for name in packed.split(TOOL_SEPARATOR) if name]


def tool_pattern(name: str) -> str:
    """What the packed column contains when the rollout used `name`."""
    return f"{TOOL_SEPARATOR}{tool_name(name)}{TOOL_SEPARATOR}"


def columns(turns: list[dict[str, Any]] | None, end_reason: str | None) -> dict[str, Any]:
    """The Rollout fields filters read: num_turns, tool_calls, tool_errors, tools_used, ended_at_limit.

    A single-turn completion (turns None) is the one-turn case with no tools."""
    if turns is None:
        return {"num_turns": 1, "tool_calls": 0, "tool_errors": 0, "tools_used": "", "ended_at_limit": False}
    calls = [call for turn in turns for call in turn.get("tool_calls") or []]
    return {
        "num_turns": len(turns),
        "tool_calls": len(calls),
        "tool_errors": sum(1 for call in calls if call.get("error")),
        "tools_used": pack_tools([call.get("name", "") for call in calls]),
        "ended_at_limit": end_reason in LIMIT_END_REASONS,
    }
