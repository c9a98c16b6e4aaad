"""The trackers the mirror can feed, by name: importing the adapter modules registers each one in
workers.mirroring.registry (importing them loads no tracker client: each imports its client inside its
methods, on the mirror thread, so a worker that mirrors nothing never loads one)."""

from __future__ import annotations

# Each adapter registers itself on import.
import workers.mirroring.mlflow_tracker  # noqa: F401
import workers.mirroring.trackio_tracker  # noqa: F401
import workers.mirroring.wandb_tracker  # noqa: F401
from workers.mirroring.registry import TRACKERS


def tracker_class(name: str) -> type:
    """The adapter class registered as `name`; the registry's error lists the known names."""
    return TRACKERS.get(name)
