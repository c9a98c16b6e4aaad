"""How far a generation is, said while it runs: "step 1: sampled 24 of 64 completions (31 s)".

On a CPU with a real model one step's sampling (or the step-0 validation) takes minutes, and the run
page said nothing between "starting (4/4): step 1: sampling ..." and the step's metrics (issue 39).
The engine tells `GenerationProgress.add` each time completions finish (`RolloutEngine.completed`:
the transformers engine when rows of its decode loop end, or after each `generate()` batch) and
`decoding` which token its batch samples (`RolloutEngine.decoding`: rows that all run to the length
limit end together, so the count alone would jump from 0 to the whole); the one sampling (`begin`)
says how many it expects. A line goes to `say` (the run's log) at most every `every_s` seconds, the
first only once the sampling has taken that long: a fast step says nothing, and the cost is a clock
read per finished completion and per token position of a batch, never a line. A sampling that said
anything ends with its whole count (`end`), so the count a reader last saw rises to the total."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

EVERY_S = 5.0
# What such a line looks like, for the run page, which shows the latest under its header until the step's
# metrics arrive (studio.sharing.client_rules hands it to the page's JS: a pattern both regex engines read).
LINE_PATTERN = (
    r"^(step \d+( \(round \d+\))?|the step-0 validation|validation after step \d+): sampled \d+ of \d+ completions"
)


class GenerationProgress:
    """Counts one sampling at a time (the trainer's steps and validations take turns) and says how far it is."""

    def __init__(
        self, say: Callable[[str], None], every_s: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.say = say
        self.every_s = EVERY_S if every_s is None else every_s
        self.clock = clock
        self.lock = threading.Lock()  # the asynchronous generator's thread may finish completions too
        self.what: str | None = None  # the sampling under way (None: none, counts are ignored)
        self.total = 0
        self.done = 0
        self.started = 0.0
        self.said_at: float | None = None  # when the last line went out (None: none yet for this sampling)
        self.token: tuple[int, int] | None = None  # the batch being decoded: (token, max_new_tokens)

    @contextmanager
    def sampling(self, what: str, total: int) -> Iterator[None]:
        """Count the completions of one sampling ("step 3", "validation after step 2") of `total` in the block."""
        self.begin(what, total)
        try:
            yield
        finally:
            self.end()

    def begin(self, what: str, total: int) -> None:
        with self.lock:
            self.what, self.total, self.done = what, total, 0
            self.started, self.said_at, self.token = self.clock(), None, None

    def add(self, finished: int) -> None:
        """`finished` more completions are done (from the engine)."""
        with self.lock:
            if self.what is None:
                return
            self.done = min(self.total, self.done + finished)
            self._maybe_say()

    def decoding(self, token: int, of: int) -> None:
        """The batch being decoded samples its `token`-th token of at most `of` (from the engine)."""
        with self.lock:
            if self.what is None:
                return
            self.token = (token, of)
            self._maybe_say()

    def _maybe_say(self) -> None:
        now = self.clock()
        since = self.said_at if self.said_at is not None else self.started
        if now - since >= self.every_s and self.done < self.total:
            self._say(now)

    def end(self) -> None:
        """The sampling is over: its whole count, when a line has said a part of it."""
        with self.lock:
            if self.what is not None and self.said_at is not None:
                self.done = self.total
                self._say(self.clock())
            self.what = None

    def _say(self, now: float) -> None:
        self.said_at = now
        batch = (
            f", the batch at token {self.token[0]} of {self.token[1]}" if self.token and self.done < self.total else ""
        )
        self.say(f"{self.what}: sampled {self.done} of {self.total} completions{batch} ({now - self.started:.0f} s)")


def counted(progress: GenerationProgress | None, what: str, total: int) -> AbstractContextManager:
    """`progress.sampling(what, total)`, or nothing without a progress."""
    return progress.sampling(what, total) if progress is not None else nullcontext()
