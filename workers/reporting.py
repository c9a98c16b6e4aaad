"""The worker's Reporter: buffer what the trainer reports, write it in batches, then publish.

A flush is one transaction: MetricPoint / Rollout / RolloutScore rows plus the RunEvents
that describe them (seq allocated in `studio.runs.events`), published after commit.
Flushes happen when a step's rollouts arrive (the trainer reports them last, so they
close the step: its metrics, log lines and rollouts go in one write and reach the
browser together, without waiting for the next step), when FLUSH_INTERVAL_S has passed
or FLUSH_ROWS rows are waiting, on checkpoints and at the end. A fast tiny-model run
makes one write per step, not one per metric. While the database is unreachable the reports
wait in memory and are written, once each and in order, when it is back (DatabaseReporter).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction

from studio.runs import events, reports, usage
from studio.runs.models import RUNNING, Run, RunEvent
from studio.runs.reports import version_spans, without_nul  # noqa: F401 - version_spans: tests import it from here
from trainers.report import STOP_NOW, TOKENS_GENERATED, TOKENS_TRAINED, Rollout
from workers.outages import database_unreachable, drop_connection

log = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 0.5
FLUSH_ROWS = 2000
LOG_TAIL = 30
RETRY_FIRST_S = 0.5  # the database unreachable: the next try after this, doubling up to RETRY_MAX_S
RETRY_MAX_S = 5.0
FINAL_FLUSH_RETRY_S = 60.0  # how long `flush()` (the end of a run) keeps trying before ReportsNotWritten
PENDING_WARN_ROWS = 200_000  # rows waiting in memory past which a log line says so (again at each doubling)


class ReportsNotWritten(RuntimeError):
    """`DatabaseReporter.flush()` could not reach the database for FINAL_FLUSH_RETRY_S."""


class DatabaseReporter:
    """Implements trainers.report.Reporter for one run.

    The database away (unreachable, the connection dropped: workers.outages) does not lose reports:
    a flush that cannot write leaves them all pending, in order, closes the broken connection and
    returns; the next flush (the interval, the next step) tries again on a new connection, at most
    every RETRY_FIRST_S doubling up to RETRY_MAX_S. A flush is one transaction, so a batch is written
    whole or not at all; when the COMMIT itself fails (the connection broke before the server said
    whether it committed) the next try first looks for the batch's last event, so nothing is written
    twice. One warning says that writing stopped, one that it resumed. `flush()`, which must write
    (the end of a run), keeps trying for FINAL_FLUSH_RETRY_S, then raises ReportsNotWritten. Any
    other database error (a bad value) is raised at once, its batch dropped, as always."""

    def __init__(self, run_id: int, flush_interval_s: float = FLUSH_INTERVAL_S, attempt: int | None = None) -> None:
        self.run_id = run_id
        self.flush_interval_s = flush_interval_s
        # The attempt (Run.restarts when the worker claimed the run) whose reports these are. A process that
        # hung (SIGSTOP, a frozen VM) and goes on after the studio gave up on it has reports of a step the
        # newer attempt writes too, and a checkpoint on its way down: each batch is written only while the
        # run is still running under this attempt, or else dropped (`superseded`), so it cannot write steps
        # twice, move the run's progress back or add a checkpoint to a run that ended. None: not checked.
        self.attempt = attempt
        self.superseded = False
        # The run's CancelCheck (workers.tasks sets it): a stop that was its worker shutting down is told as such.
        self.stop_check: CancelCheck | None = None
        self.pending: list[tuple[str, int | None, Any]] = []  # (kind, step, payload) in report order
        self.pending_rows = 0
        self.last_flush = time.monotonic()
        # Where the run stands (a restarted or resumed run goes on from its checkpoint's step): each
        # flush writes it, so it must not start at 0.
        self.last_step = Run.objects.filter(pk=run_id).values_list("last_step", flat=True).first() or 0
        self.log_tail: deque[str] = deque(maxlen=LOG_TAIL)
        # the database unreachable: since when (monotonic; None while writes succeed), the next try, why
        self.failing_since: float | None = None
        self.retry_delay = RETRY_FIRST_S
        self.retry_at = 0.0
        self.last_error = ""
        # (items, rows, events) of the pending batch whose COMMIT failed: written or not, the next try finds out
        self.unconfirmed: tuple[int, int, list[dict[str, Any]]] | None = None
        self.warn_rows = PENDING_WARN_ROWS
        # What this attempt uses (workers.tasks starts it when the run's devices are claimed): written with
        # every batch, so a running run shows its usage, and final when the attempt ends. None: not metered.
        self.meter: UsageMeter | None = None

    # --- Reporter protocol -------------------------------------------------------------
    def metrics(self, step: int, values: dict[str, float]) -> None:
        if self.meter is not None:
            self.meter.observe(values)
        self._add("metrics", step, {k: float(v) for k, v in values.items()}, len(values))

    def rollouts(self, step: int, rollouts: list[Rollout]) -> None:
        self._add("rollouts", step, list(rollouts), len(rollouts) * 2)
        self._flush_when_reachable()

    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None:
        """Per-prompt statistics of the prompts the step drew (studio.runs.prompt_stats): written
        with the step's other rows, with a small `prompt_stats` event an open prompts view follows."""
        self._add("prompt_stats", step, [dict(s) for s in stats], len(stats))

    def status(self, state: str, detail: str = "") -> None:
        # The task owns the run's state (queued/running/final); the trainer's own status
        # reports become log lines so nothing it says is lost.
        if state == "cancelled" and self.stop_check is not None and self.stop_check.interrupted:
            # Nobody cancelled it: its worker was stopped (Ctrl-C of `up`, a deploy), and it resumes.
            state, detail = "interrupted", f"the worker was stopped; resumes on the next start of a worker ({detail})"
        self.log(f"[{state}] {detail}".rstrip())

    def checkpoint(self, step: int, path: str) -> None:
        self._add("checkpoint", step, {"path": str(path)}, 1)
        self._flush_when_reachable()

    def log(self, line: str) -> None:
        for part in str(line).splitlines() or [""]:
            self.log_tail.append(part)
        self._add("log", None, {"line": without_nul(str(line))}, 1)

    def warning(self, step: int | None, message: str) -> None:
        self.log(f"warning: {message}")  # also in the log tail a failed run's error quotes
        self._add("warning", step, {"message": without_nul(str(message))}, 1)

    # --- batching ---------------------------------------------------------------------
    def _add(self, kind: str, step: int | None, payload: Any, rows: int) -> None:
        self.pending.append((kind, step, payload))
        self.pending_rows += rows
        if step is not None:
            self.last_step = max(self.last_step, step)
        if self.pending_rows >= self.warn_rows:  # kept, never dropped: say so while memory grows
            away = time.monotonic() - (self.failing_since or time.monotonic())
            log.warning("run %s: %d report rows wait in memory (the database unreachable for %.0f s): %s",
                        self.run_id, self.pending_rows, away, self.last_error or "no write tried yet")  # fmt: skip
            self.warn_rows *= 2
        if self.pending_rows >= FLUSH_ROWS or time.monotonic() - self.last_flush >= self.flush_interval_s:
            self._flush_when_reachable()

    def flush(self) -> None:
        """Write everything pending now (the end of a run). The database unreachable: try again
        for up to FINAL_FLUSH_RETRY_S, then raise ReportsNotWritten (the reports stay pending)."""
        deadline = time.monotonic() + FINAL_FLUSH_RETRY_S
        while not self._try_flush():
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReportsNotWritten(
                    f"run {self.run_id}: {len(self.pending)} reports ({self.pending_rows} rows) could not be "
                    f"written: the database was unreachable for {FINAL_FLUSH_RETRY_S:.0f} s at the end of the run "
                    f"({self.last_error})"
                )
            time.sleep(min(max(0.0, self.retry_at - time.monotonic()), left))

    def _flush_when_reachable(self) -> None:
        """A flush that may wait: skipped until the next try is due while the database is unreachable."""
        if (self.pending or self.unconfirmed) and time.monotonic() >= self.retry_at:
            self._try_flush()

    def _try_flush(self) -> bool:
        """One try at writing what is pending; False (everything still pending) when the database
        could not be reached. Any other database error is raised."""
        self.last_flush = time.monotonic()
        try:
            if self.unconfirmed is not None:
                self._settle_unconfirmed()
            if self.pending:
                self._write_batch()
        except DatabaseError as exc:
            if not database_unreachable(exc):
                raise
            self._unreachable(exc)
            return False
        if self.failing_since is not None:
            log.warning("run %s: the database is reachable again; reports written after %.1f s of waiting",
                        self.run_id, time.monotonic() - self.failing_since)  # fmt: skip
            self.failing_since, self.retry_delay, self.retry_at = None, RETRY_FIRST_S, 0.0
        self.warn_rows = PENDING_WARN_ROWS
        return True

    def _write_batch(self) -> None:
        """Everything pending in one transaction, its events published after commit."""
        count, rows = len(self.pending), self.pending_rows
        messages = None
        if self.superseded:
            self._forget(count, rows)
            return
        try:
            with transaction.atomic():
                if not self._still_this_attempts():
                    self._forget(count, rows)
                    return
                items = [self._write(kind, step, payload) for kind, step, payload in self.pending[:count]]
                messages = events.record(self.run_id, [i for i in items if i is not None], last_step=self.last_step)
                if self.meter is not None:  # with the batch: the usage shown never lags the steps shown
                    self.meter.write(final=False)
        except Exception as exc:
            if not database_unreachable(exc):
                self._forget(count, rows)  # a bad value: the batch would fail again; dropped, as always
            elif messages:  # the body ran, so the COMMIT failed: the server may have committed it
                self.unconfirmed = (count, rows, messages)
            raise
        self._forget(count, rows)

    def _still_this_attempts(self) -> bool:
        """Whether the run still runs under this reporter's attempt, its row locked until the batch commits
        (so a sweeper cannot end the attempt between this read and the write); warns once when not."""
        if self.attempt is None:
            return True
        if Run.objects.select_for_update().filter(pk=self.run_id, state=RUNNING, restarts=self.attempt).exists():
            return True
        self.superseded = True
        log.warning("run %s: attempt %s was given up on (the run ended or a newer attempt runs it): its reports "
                    "from here on are dropped", self.run_id, self.attempt)  # fmt: skip
        return False

    def _settle_unconfirmed(self) -> None:
        """Whether the batch whose COMMIT failed was written after all: its last event says (same
        seq and time; a seq given back by a rolled-back batch is taken by the next writer, at
        another time). Written: it leaves the pending reports, and its events are published now."""
        count, rows, messages = self.unconfirmed
        last = messages[-1]
        written = RunEvent.objects.filter(run_id=self.run_id, seq=last["seq"], created=last["time"]).exists()
        self.unconfirmed = None
        if written:
            self._forget(count, rows)
            events.publish(self.run_id, messages)

    def _forget(self, count: int, rows: int) -> None:
        del self.pending[:count]
        self.pending_rows -= rows

    def _unreachable(self, exc: DatabaseError) -> None:
        """A try failed for want of the database: drop the broken connection, warn once per outage,
        and put off the next try."""
        drop_connection()
        self.last_error = f"{type(exc).__name__}: {str(exc).strip()}"
        if self.failing_since is None:
            self.failing_since = time.monotonic()
            self.retry_delay = RETRY_FIRST_S
            log.warning("run %s: could not write its reports (%s); %d kept, trying again on a new connection",
                        self.run_id, self.last_error, len(self.pending))  # fmt: skip
        else:
            self.retry_delay = min(self.retry_delay * 2, RETRY_MAX_S)
        self.retry_at = time.monotonic() + self.retry_delay

    def _write(self, kind: str, step: int | None, payload: Any) -> events.EventItem | None:
        """Write the rows behind one reported item; returns its event (None: it has none). The one
        writer of those rows (studio.runs.reports), which the ingest API uses too."""
        return reports.write(self.run_id, kind, step, payload)


class UsageMeter:
    """One attempt's usage as its worker sees it (studio.runs.usage): each of its processes (`procs`, from the
    run's placement and the GPUs it leased) on its device from when the worker claimed them, and the tokens
    its step metrics count (the trainer reports the step's sums over processes). Wall time, not busy time: a
    device the run holds is used by it, loading the model and checkpointing included."""

    def __init__(self, run_id: int, attempt: int, procs: list[dict[str, Any]], started: float | None = None) -> None:
        self.run_id = run_id
        self.attempt = attempt
        self.procs = procs
        self.started = time.monotonic() if started is None else started
        self.tokens_generated = 0
        self.tokens_trained = 0
        self.ended: float | None = None

    def observe(self, values: dict[str, float]) -> None:
        """Add a step's token counts (its metrics; a metrics report without them adds nothing)."""
        self.tokens_generated += round(float(values.get(TOKENS_GENERATED, 0.0)))
        self.tokens_trained += round(float(values.get(TOKENS_TRAINED, 0.0)))
        if "perf/gpu_mem_peak_gb" in values:  # reported only on CUDA: a Ray run's processes are on GPUs
            self.procs = [{**p, "device": usage.RAY_GPU} if p["device"] == usage.RAY_DEVICE else p for p in self.procs]

    @property
    def seconds(self) -> float:
        """Wall time of each process so far (up to the end, once ended)."""
        return (self.ended if self.ended is not None else time.monotonic()) - self.started

    def write(self, final: bool) -> None:
        """Record the attempt's usage so far on the run; `final`: the attempt has ended (its clock stops)."""
        if final and self.ended is None:
            self.ended = time.monotonic()
        usage.record(self.run_id, self.attempt, self.procs, self.seconds, tokens_generated=self.tokens_generated,
                     tokens_trained=self.tokens_trained, final=final)  # fmt: skip


class CancelCheck:
    """`should_stop` for the trainer: true once the run's cancel is requested, once its worker is
    shutting down (`interrupt()`: a SIGTERM to this process, or `interrupt_requested` set by the
    worker's main process), or once the run is no longer this attempt's to run (the sweeper ended it
    as lost, a restart began a newer attempt, the studio was stopped): a run the studio has given up
    on must not keep a GPU busy. Reads the row at most once per `every_s`; `interrupted` says whether
    the stop was the infrastructure's (the run ends interrupted, not cancelled). A user's "Stop now"
    (Run.stop_saves_checkpoint False) answers STOP_NOW: the trainer ends without saving a checkpoint."""

    def __init__(self, run_id: int, every_s: float = 1.0, attempt: int | None = None) -> None:
        self.run_id = run_id
        self.every_s = every_s
        self.attempt = attempt
        self.checked_at = 0.0
        self.cancelled = False
        self.interrupted = False
        self.unreachable = False  # the last read failed: one warning per outage
        self.without_checkpoint = False  # the user asked to stop now, without saving

    def interrupt(self) -> None:
        """Stop at the next check, as interrupted (safe from a signal handler: sets two flags)."""
        self.interrupted = self.cancelled = True

    def __call__(self) -> bool | str:
        now = time.monotonic()
        if not self.cancelled and now - self.checked_at >= self.every_s:
            self.checked_at = now
            runs = Run.objects.filter(pk=self.run_id, state=RUNNING)
            if self.attempt is not None:
                runs = runs.filter(restarts=self.attempt)
            try:
                row = runs.values_list("cancel_requested", "interrupt_requested", "stop_saves_checkpoint").first()
            except (OperationalError, InterfaceError) as exc:
                # The database is away: go on training (its reports wait in the reporter) and ask again
                # on a new connection next time; a run the studio gave up on meanwhile stops then.
                if not self.unreachable:
                    log.warning("run %s: could not read its cancel flag (%s); asking again every %s s",
                                self.run_id, exc, self.every_s)  # fmt: skip
                self.unreachable = True
                connection.close()
                return False
            self.unreachable = False
            if row is None or row[0]:
                self.cancelled = True
                self.without_checkpoint = row is not None and not row[2]
            elif row[1]:
                self.interrupt()
        # "Stop now": the trainer ends without a checkpoint (an interrupted run saves one, to resume from).
        return STOP_NOW if self.cancelled and self.without_checkpoint and not self.interrupted else self.cancelled
