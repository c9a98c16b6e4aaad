"""The settings that differ between runs, as dotted paths (`algorithm.kl_beta`).

Lists of dicts (rubric criteria) are walked by index (`rubric.criteria[0].weight`), so a
changed weight shows as one row rather than a whole list; other lists are compared whole.
"""

from __future__ import annotations

from typing import Any

MISSING = None  # what a run without the setting shows; JSON has no "undefined"


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted path: leaf value} of a JSON-like value."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, inner in enumerate(value):
            out.update(flatten(inner, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def differences(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows `{"path", "values"}` (values in the order of `specs`) where not all specs agree."""
    flat = [flatten(spec) for spec in specs]
    paths = sorted(set().union(*flat)) if flat else []
    rows = []
    for path in paths:
        values = [f.get(path, MISSING) for f in flat]
        if any(v != values[0] for v in values[1:]):
            rows.append({"path": path, "values": values})
    return rows
