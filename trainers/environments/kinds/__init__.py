"""Environment kinds, one module each; importing this package registers them in `ENVIRONMENTS`.
None imports torch: the studio renders each kind's form from its `params_model`."""

from __future__ import annotations

from trainers.environments.base import ENVIRONMENTS, Environment
from trainers.environments.kinds import procedural  # noqa: F401  (registers lookup, guess_number)

__all__ = ["ENVIRONMENTS", "Environment"]
