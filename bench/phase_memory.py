"""Peak resident memory per phase of our GRPO step, sampled while it runs (used by trainer_vs_trl.py's
`--memory-phases`; importable on its own).

A thread samples the process every few milliseconds: its resident set (`/proc/self/statm`) and, from
glibc's `mallinfo2`, the bytes malloc has handed out and not had back (in use: the live tensors and the
interpreter's objects). Their difference is memory malloc holds for the process without a live
allocation in it (freed chunks it keeps in its heaps: fragmentation), which the resident set counts.
The phase is whatever the trainer is doing at the sample: generate, old/ref logprobs, train forward,
train backward (the chunked head's recomputation included), optimizer step, other.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")
    ]  # fmt: skip


def _mallinfo() -> Callable[[], tuple[int, int]] | None:
    """(bytes in use, bytes malloc holds) of glibc's allocator, or None without glibc's mallinfo2."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _Mallinfo2

    def read() -> tuple[int, int]:
        info = fn()
        return info.uordblks + info.hblkhd, info.arena + info.hblkhd

    return read


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE


class PhaseMemory:
    """Samples the resident set and malloc's bytes in use every `interval` s, per phase."""

    def __init__(self, interval: float = 0.003) -> None:
        self.interval = interval
        self.phase = "other"
        self.peaks: dict[str, dict[str, float]] = {}
        self._malloc = _mallinfo()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PhaseMemory:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        rss = rss_bytes()
        used = self._malloc()[0] if self._malloc is not None else 0
        peak = self.peaks.setdefault(self.phase, {"rss_mib": 0.0, "in_use_mib": 0.0, "in_use_at_rss_peak_mib": 0.0})
        if rss / MIB > peak["rss_mib"]:
            peak["rss_mib"] = rss / MIB
            peak["in_use_at_rss_peak_mib"] = used / MIB
        peak["in_use_mib"] = max(peak["in_use_mib"], used / MIB)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval)

    @contextmanager
    def during(self, phase: str):
        previous, self.phase = self.phase, phase
        self._sample()
        try:
            yield
        finally:
            self._sample()
            self.phase = previous


def wrap(owner: Any, name: str, memory: PhaseMemory, phase: str) -> None:
    """Make `owner.name(...)` run inside `memory.during(phase)`."""
    original = getattr(owner, name)

    def wrapped(*args, **kwargs):
        with memory.during(phase):
            return original(*args, **kwargs)

    setattr(owner, name, wrapped)


def instrument(trainer: Any) -> PhaseMemory:
    """Phase hooks on a `trainers.run.loop.Trainer` (engine, no-grad passes, training passes, optimiser);
    returns the started sampler."""
    import torch

    import trainers.update.passes as passes

    memory = PhaseMemory().start()
    wrap(trainer.engine, "generate", memory, "generate")
    wrap(trainer.update, "frozen", memory, "old/ref logprobs")
    wrap(passes, "token_logprobs", memory, "train forward")
    wrap(torch.Tensor, "backward", memory, "train backward")
    wrap(trainer.optimizer, "step", memory, "optimizer step")
    return memory


def table(peaks: dict[str, dict[str, float]]) -> str:
    """The per-phase peaks as lines of text, in the order a step runs them."""
    order = ["generate", "old/ref logprobs", "train forward", "train backward", "optimizer step", "other"]
    lines = [f"    {'phase':<17} {'peak RSS MiB':>12} {'malloc in use then':>18} {'peak in use':>11}"]
    for phase in sorted(peaks, key=lambda p: order.index(p) if p in order else len(order)):
        p = peaks[phase]
        lines.append(
            f"    {phase:<17} {p['rss_mib']:>12,.0f} {p['in_use_at_rss_peak_mib']:>18,.0f} {p['in_use_mib']:>11,.0f}"
        )
    return "\n".join(lines)
