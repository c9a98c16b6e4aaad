"""A stop that stops: a stop asked for during a step ends it between two sampled tokens, not at its end.

`should_stop()` is asked between steps, as always, and (for a run of one process that samples
synchronously) also inside the step: the transformers engine asks between tokens
(`RolloutEngine.between_tokens`), the collector between generation and the update. A stop found there
raises `StepStopped`; the step's groups are dropped before the update touches the weights, and the
trainer's data position, curriculum, hint levels and random states are put back as the last whole step
left them (`StepStart`), so the checkpoint written then is that step's, exactly as if the run had stopped
between steps (a run resumed from it samples the same completions). The policy update itself is never
interrupted: a half-updated model is never saved.

Why not under several processes or asynchronous sampling: the processes would have to agree inside their
collectives, and the generator thread of the asynchronous pipeline is not the one that may unwind the
step; those runs stop at the end of the step, as before.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainers.report import STOP_NOW
from trainers.run.checkpoint import TrainerState, rng_state, set_rng_state


class StepStopped(Exception):  # noqa: N818 - it is a stop, not an error
    """A stop was asked for inside a step: the step is dropped (trainers.run.loop catches it)."""


ASK_EVERY_S = 0.2  # inside a step: per token it would cost a read of the cancel flag


class StopWatch:
    """The run's `should_stop`, remembered once it has said stop, and asked at most every `every_s`
    (ASK_EVERY_S) inside a step."""

    def __init__(self, should_stop: Callable[[], bool | str], every_s: float | None = None) -> None:
        self.should_stop = should_stop
        self.every_s = ASK_EVERY_S if every_s is None else every_s
        self.answer: bool | str = False
        self.asked_at = float("-inf")

    def __call__(self) -> bool | str:
        """Between steps: the answer now (true once it has been)."""
        if not self.answer:
            self.asked_at = time.monotonic()
            self.answer = self.should_stop() or False
        return self.answer

    def check(self) -> None:
        """Inside a step: StepStopped once a stop is asked for."""
        if not self.answer and time.monotonic() - self.asked_at < self.every_s:
            return
        if self():
            raise StepStopped

    @property
    def keep_checkpoint(self) -> bool:
        """False for "Stop now" (STOP_NOW): the run ends without saving."""
        return self.answer != STOP_NOW


@dataclass
class StepStart:
    """What a step moves besides the weights, as it was when the step began: put back when the step is
    dropped, so that what is saved is the last whole step's state."""

    rng: dict[str, Any]
    engine: dict[str, Any]
    data: dict[str, Any]
    curriculum: dict[str, Any]
    hints: dict[str, Any] | None

    @classmethod
    def of(cls, trainer: TrainerState) -> StepStart:
        hinter = trainer.hinter
        return cls(
            rng=rng_state(),
            engine=copy.deepcopy(trainer.engine.state_dict()),
            data=copy.deepcopy(trainer.source.state_dict()),
            curriculum=copy.deepcopy(trainer.curriculum.state_dict()),
            hints=copy.deepcopy(hinter.schedule.state_dict()) if hinter is not None else None,
        )

    def restore(self, trainer: TrainerState) -> None:
        set_rng_state(self.rng)
        trainer.engine.load_state_dict(self.engine)
        trainer.source.load_state_dict(self.data)
        trainer.curriculum.load_state_dict(self.curriculum)
        if trainer.hinter is not None and self.hints is not None:
            trainer.hinter.schedule.load_state_dict(self.hints)
