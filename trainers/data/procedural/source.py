"""The prompt source of a procedural run: the pool of the current difficulty level, served as a
`PromptSource` serves a dataset, and the controller that moves the level after each step.

Its `state_dict` holds each level's data position and the controller's state, so a resumed run
continues on the same level, with the same window, drawing the same prompts.
"""

from __future__ import annotations

from typing import Any

from trainers.data.procedural.controller import DifficultyController
from trainers.data.procedural.rows import pool_rows
from trainers.data.prompts import Prompt, render_prompt
from trainers.data.source import PromptSource
from trainers.spec import DataSpec


class ProceduralSource:
    def __init__(self, data: DataSpec, tokenizer, *, seed: int) -> None:
        if data.procedural is None:
            raise ValueError("ProceduralSource needs data.procedural")
        self.data, self.spec, self.tokenizer = data, data.procedural, tokenizer
        self.seed = seed  # the serving order's; the problems come from spec.seed
        p = self.spec
        # Without adapt the band is never consulted: a window longer than any run keeps the level.
        self.controller = DifficultyController(
            level=p.start_difficulty, lowest=p.min_difficulty, highest=p.highest, band=p.target_band,
            window=p.window if p.adapt else 2**62,
        )  # fmt: skip
        self._sources: dict[int, PromptSource] = {}

    @property
    def level(self) -> int:
        return self.controller.level

    def level_source(self, level: int) -> PromptSource:
        """The pool of `level` (generated and tokenised on first use), with its own data position."""
        if level not in self._sources:
            rows = pool_rows(self.spec.task, self.spec.seed, level, self.spec.pool_size)
            prompts = [render_prompt(row, self.tokenizer, self.data) for row in rows]
            self._sources[level] = PromptSource(prompts, seed=self.seed + level, shuffle=self.data.shuffle)
        return self._sources[level]

    # What PromptSource offers the loop: the batch, and the position for data/epoch.
    def next_batch(self, n: int) -> list[Prompt]:
        return self.level_source(self.level).next_batch(n)

    @property
    def prompts(self) -> list[Prompt]:
        return self.level_source(self.level).prompts

    @property
    def epoch(self) -> int:
        return self.level_source(self.level).epoch

    @property
    def index(self) -> int:
        return self.level_source(self.level).index

    def observe(self, passed: int, total: int) -> dict[str, float]:
        """After a step at the current level: `passed` of `total` rollouts reached the pass threshold.
        Moves the level for the next step; returns the step's `procedural/*` metrics."""
        rate = passed / total if total else 0.0
        metrics = {"procedural/difficulty": float(self.level), "procedural/pass_rate": rate}
        self.controller.observe(rate)
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {
            "controller": self.controller.state_dict(),
            "levels": {level: source.state_dict() for level, source in self._sources.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.controller.load_state_dict(state["controller"])
        for level, position in state["levels"].items():
            self.level_source(int(level)).load_state_dict(position)
