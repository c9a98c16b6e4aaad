"""Environment kinds, one module each; importing this package registers them in `ENVIRONMENTS`.
None imports torch. Their settings (what the studio renders) are in
`trainers.rollout.environments.catalog`."""

from __future__ import annotations

from trainers.rollout.environments.base import ENVIRONMENTS, Environment
from trainers.rollout.environments.kinds import (  # noqa: F401  (importing registers them)
    procedural,
    python_env,
    tools,
    verifiers_env,
)

__all__ = ["ENVIRONMENTS", "Environment"]
