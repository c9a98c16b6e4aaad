"""RLVE's adaptive difficulty (arXiv:2511.07317, "RLVE: Scaling Up Reinforcement Learning for
Language Models with Adaptive Verifiable Environments"): keep the policy's pass rate inside a
target band by moving the task's difficulty one level at a time.

The controller sees one pass rate per step, at the level the step's prompts were drawn from.
Once it holds `window` steps at the current level, it compares their mean with the band: above
`high` it raises the level, below `low` it lowers it, within the band it keeps it (and the window
slides on). A change clears the window, so the next decision rests on `window` steps at the new
level only: the hysteresis that keeps one lucky step from moving the level back and forth.
Bounded by [lowest, highest].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DifficultyController:
    level: int
    lowest: int
    highest: int
    band: tuple[float, float]  # (low, high) pass rates
    window: int  # steps at one level before it may change
    recent: list[float] = field(default_factory=list)  # pass rates of the last steps at `level`

    def __post_init__(self) -> None:
        if not self.lowest <= self.level <= self.highest:
            raise ValueError(f"level {self.level} is outside [{self.lowest}, {self.highest}]")
        if not 0 <= self.band[0] < self.band[1] <= 1:
            raise ValueError(f"band {self.band} must be (low, high) with 0 <= low < high <= 1")

    def observe(self, pass_rate: float) -> int:
        """Record one step's pass rate at the current level; returns the level for the next step."""
        self.recent = [*self.recent, pass_rate][-self.window :]
        if len(self.recent) < self.window:
            return self.level
        mean = sum(self.recent) / len(self.recent)
        low, high = self.band
        moved = self.level
        if mean > high:
            moved = min(self.level + 1, self.highest)
        elif mean < low:
            moved = max(self.level - 1, self.lowest)
        if moved != self.level:
            self.level, self.recent = moved, []
        return self.level

    def state_dict(self) -> dict[str, Any]:
        return {"level": self.level, "recent": list(self.recent)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.level, self.recent = int(state["level"]), [float(x) for x in state["recent"]]
