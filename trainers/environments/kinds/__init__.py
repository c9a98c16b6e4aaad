"""Environment kinds, one module each; importing this package registers them in `ENVIRONMENTS`.
None imports torch: the studio renders each kind's form from its `params_model`."""

from __future__ import annotations

from trainers.environments.base import ENVIRONMENTS, Environment
from trainers.environments.kinds import procedural, python_env, tools  # noqa: F401  (importing registers them)

__all__ = ["ENVIRONMENTS", "Environment"]
