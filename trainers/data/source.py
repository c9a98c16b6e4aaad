"""The training prompt stream: batches served epoch after epoch in a seeded order that a
checkpoint resumes exactly from its position."""

from __future__ import annotations

import numpy as np

from trainers.data.prompts import Prompt
from trainers.data.readers import DataError


class PromptSource:
    """Serves prompts in batches, epoch after epoch. The order of epoch e depends only on
    (seed, e), so the position (epoch, index) is all a checkpoint needs to resume exactly."""

    def __init__(self, prompts: list[Prompt], *, seed: int, shuffle: bool = True) -> None:
        if not prompts:
            raise DataError("no prompts to serve")
        self.prompts = prompts
        self.seed = seed
        self.shuffle = shuffle
        self.epoch = 0
        self.index = 0
        self._order = self._epoch_order(0)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.prompts))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.prompts))

    def next_batch(self, n: int) -> list[Prompt]:
        """The next n prompts, crossing into the next epoch when this one runs out."""
        out = []
        while len(out) < n:
            if self.index >= len(self.prompts):
                self.epoch += 1
                self.index = 0
                self._order = self._epoch_order(self.epoch)
            take = min(n - len(out), len(self.prompts) - self.index)
            out.extend(self.prompts[i] for i in self._order[self.index : self.index + take])
            self.index += take
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._order = self._epoch_order(self.epoch)
