"""transformers' own output (its progress bars: "Writing model shards", "Loading weights"; its
info and warning logs) silenced around a step whose progress our own lines already report, as the
first start's demo models being built and converted, or a run's cold start being saved.

No torch; transformers' logging module is imported where it is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Inside the block transformers shows no progress bar and logs errors only; both are put back after."""
    from transformers.utils import logging as hf_logging  # deferred: importing transformers takes seconds

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
