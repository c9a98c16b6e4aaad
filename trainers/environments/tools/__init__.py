"""Tools a model may call in the `tools` environment kind; importing this package registers the
built-in kinds in `TOOLS`. None imports torch: the studio renders each kind's form from its
`params_model`."""

from __future__ import annotations

from trainers.environments.tools import calculator, functions, python, search  # noqa: F401  (register)
from trainers.environments.tools.base import TOOLS, Clipped, Tool, ToolError

__all__ = ["TOOLS", "Clipped", "Tool", "ToolError"]
