"""Tools a model may call in the `tools` environment kind; importing this package registers the
built-in kinds in `TOOLS`. None imports torch. Their settings (what the studio renders) are in
`trainers.rollout.environments.catalog`."""

from __future__ import annotations

from trainers.rollout.environments.tools import calculator, functions, python, search  # noqa: F401  (register)
from trainers.rollout.environments.tools.base import TOOLS, Clipped, Tool, ToolError

__all__ = ["TOOLS", "Clipped", "Tool", "ToolError"]
