"""Where a sweep's driver hears its trials: their metric points written and their end (studio.runs.signals).
A driver's failure is logged, never raised into the worker's reporting or the run's end."""

from __future__ import annotations

import logging
from typing import Any

from studio.runs import signals
from studio.sweeps.driver import drive
from studio.sweeps.models import ACTIVE, T_RUNNING, Trial

log = logging.getLogger(__name__)


def connect() -> None:
    signals.metrics_written.connect(on_metrics, dispatch_uid="sweeps-metrics")
    signals.run_finished.connect(on_finished, dispatch_uid="sweeps-finished")


def sweep_of(run_id: int, keys: list[str] | None = None) -> int | None:
    """The active sweep whose running trial `run_id` is (and, given `keys`, whose objective is among them)."""
    found = Trial.objects.filter(run_id=run_id, state=T_RUNNING, sweep__state=ACTIVE).values_list(
        "sweep_id", "sweep__objective"
    ).first()  # fmt: skip
    if found is None or (keys is not None and found[1] not in keys):
        return None
    return found[0]


def on_metrics(sender: Any, run_id: int, step: int, keys: list[str], **_: Any) -> None:
    _drive(run_id, keys)


def on_finished(sender: Any, run_id: int, state: str, **_: Any) -> None:
    _drive(run_id, None)


def _drive(run_id: int, keys: list[str] | None) -> None:
    try:
        if (sweep_id := sweep_of(run_id, keys)) is not None:
            drive(sweep_id)
    except Exception:  # noqa: BLE001 - the worker's reports and the run's end go on; the next event drives again
        log.exception("run %s: its sweep's driver failed", run_id)
