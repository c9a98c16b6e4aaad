"""The tracker registry: name -> adapter class, one small adapter per tracker (trainers.registry style).
Each adapter module registers itself here on import; workers.mirroring.trackers imports them all.

An adapter is built with its settings section, the decrypted secret it names (None when it names
none) and the mirror's limits, and is called from its own mirror thread only:

    start(run: RunInfo)                       # open (or resume) the tracker's run, send the settings
    metrics(step, values: dict[str, float])
    rollouts(step, rollouts: list[Rollout]) -> int   # the sample to send is chosen here; returns how many went
    finish(state: str)                        # the studio run's final state: succeeded | failed | cancelled | ...
    location: str                             # where the tracker's run is (a URL or a folder), once started

Any exception is the tracker failing: the mirror thread records it and goes on. The client libraries are
imported inside the adapters' methods, on the mirror thread, so a worker that mirrors nothing never loads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from trainers.registry import Registry
from trainers.report import Rollout


@dataclass
class RunInfo:
    """What an adapter knows of the studio run it mirrors."""

    run_id: int
    name: str
    team: str
    experiment: str
    kind: str  # "train" | "eval"
    config: dict[str, Any]  # the run's settings (its RunSpec as stored) and the studio's identifiers
    folder: Path  # a folder of the run's on the worker, for trackers that write files
    attempt: int = 0
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def tracker_name(self) -> str:
        """The run's name in a tracker: unique per studio run, readable."""
        return f"{self.name}-{self.run_id}"


class Tracker(Protocol):
    location: str

    def start(self, run: RunInfo) -> None: ...
    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def rollouts(self, step: int, rollouts: list[Rollout]) -> int: ...
    def finish(self, state: str) -> None: ...


TRACKERS: Registry[type] = Registry("tracker")
