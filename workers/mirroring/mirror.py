"""A run's mirror: a bounded queue and a thread per tracker, fed by a Reporter wrapper that never waits."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from studio.runs.models import Run
from studio.tracking import services
from studio.tracking.models import DONE, FAILED, FAILING, OK, STARTING
from studio.tracking.schema import SECRET_FIELDS, MirrorSettings, secret_destination
from trainers.report import Reporter, Rollout
from workers.mirroring.registry import RunInfo, Tracker
from workers.mirroring.trackers import tracker_class

log = logging.getLogger(__name__)

QUEUE_SIZE = 512  # reports waiting per tracker; past this a report is dropped for that tracker (and counted)
STATUS_EVERY_S = 2.0  # the status row is written on every change of state, else at most this often
START_RETRY_FIRST_S = 5.0  # a tracker that could not start is tried again after this, doubling up to the max
START_RETRY_MAX_S = 300.0
CLOSE_TIMEOUT_S = 60.0  # at the end of a run, how long the trackers may take to send what waits and finish
ERROR_CHARS = 2000


class TrackerThread:
    """One tracker of one run: takes reports from its queue and sends them, on its own thread."""

    def __init__(self, name: str, run: RunInfo, team_id: int, mirror_settings: MirrorSettings) -> None:
        self.name, self.run, self.team_id, self.settings = name, run, team_id, mirror_settings
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_SIZE)
        self.adapter: Tracker | None = None
        self.state = STARTING
        self.steps_sent = self.rollouts_sent = self.failures = self.dropped = 0
        self.last_error = ""
        self.written_at = 0.0
        self.retry_at = 0.0
        self.retry_delay = START_RETRY_FIRST_S
        self.thread = threading.Thread(target=self._loop, name=f"mirror-{name}-{run.run_id}", daemon=True)

    def put(self, item: tuple) -> None:
        """Queue a report without waiting (called on the training thread)."""
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    # --- the mirror thread -----------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while True:
                kind, step, payload = self.queue.get()
                if kind == "finish":
                    self._finish(payload)
                    return
                self._send(kind, step, payload)
        finally:
            connection.close()  # this thread's database connection

    def _adapter(self) -> Tracker | None:
        """The started adapter; None while the tracker cannot be started (tried again after a delay)."""
        if self.adapter is not None:
            return self.adapter
        if time.monotonic() < self.retry_at:
            return None
        try:
            section = getattr(self.settings, self.name)
            secret_name = getattr(section, SECRET_FIELDS[self.name])
            destination = secret_destination(self.name, section)
            # The secret is read and decrypted here, on the mirror thread, right before the client that sends
            # it starts, and only if it is bound to the server the client sends to; it lives only in the adapter.
            secret = (
                services.secret_for(self.team_id, secret_name, destination) if secret_name and destination else None
            )
            adapter = tracker_class(self.name)(section, secret, self.settings)
            adapter.start(self.run)
        except Exception as exc:  # noqa: BLE001 - any failure of a tracker is shown, never raised into the run
            self.retry_at = time.monotonic() + self.retry_delay
            self.retry_delay = min(self.retry_delay * 2, START_RETRY_MAX_S)
            self._failed(f"could not start: {type(exc).__name__}: {exc}")
            return None
        self.adapter = adapter
        self.retry_delay = START_RETRY_FIRST_S
        return adapter

    def _send(self, kind: str, step: int, payload: Any) -> None:
        adapter = self._adapter()
        if adapter is None:
            self.dropped += 1
            return
        try:
            if kind == "metrics":
                adapter.metrics(step, payload)
                self.steps_sent += 1
            elif kind == "rollouts":
                self.rollouts_sent += adapter.rollouts(step, payload)
        except Exception as exc:  # noqa: BLE001
            self._failed(f"{kind} of step {step}: {type(exc).__name__}: {exc}")
            return
        self._write(OK)

    def _finish(self, run_state: str) -> None:
        adapter = self.adapter if self.adapter is not None else self._adapter()
        if adapter is None:
            self._write(FAILED, force=True)
            return
        try:
            adapter.finish(run_state)
        except Exception as exc:  # noqa: BLE001
            self.failures += 1
            self.last_error = f"could not finish: {type(exc).__name__}: {exc}"[:ERROR_CHARS]
            self._write(FAILED, force=True)
            return
        self._write(DONE, force=True)

    def _failed(self, message: str) -> None:
        self.failures += 1
        self.last_error = message[:ERROR_CHARS]
        log.warning("run %s: mirroring to %s: %s", self.run.run_id, self.name, self.last_error)
        self._write(FAILING)

    def _write(self, state: str, force: bool = False) -> None:
        """The status row, on a change of state or every STATUS_EVERY_S; a database away is logged, not raised."""
        changed = state != self.state
        self.state = state
        if not (force or changed or time.monotonic() - self.written_at >= STATUS_EVERY_S):
            return
        self.written_at = time.monotonic()
        try:
            services.record_status(self.run.run_id, self.name, **self.fields())
        except Exception:  # noqa: BLE001
            log.warning("run %s: could not write the %s mirror's status", self.run.run_id, self.name, exc_info=True)
            connection.close()

    def fields(self) -> dict[str, Any]:
        return {
            "state": self.state, "location": getattr(self.adapter, "location", "")[:1000],
            "steps_sent": self.steps_sent, "rollouts_sent": self.rollouts_sent, "failures": self.failures,
            "dropped": self.dropped, "last_error": self.last_error,
        }  # fmt: skip


class Mirror:
    """The trackers of one run. `wrap` the run's reporter; `close` at its end."""

    def __init__(self, threads: list[TrackerThread]) -> None:
        self.threads = threads
        for t in threads:
            t.thread.start()

    def wrap(self, reporter: Reporter) -> MirroredReporter:
        return MirroredReporter(reporter, self)

    def put(self, item: tuple) -> None:
        for t in self.threads:
            t.put(item)

    def close(self, run_state: str, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Let each tracker send what waits and finish, for at most `timeout_s` in all; a tracker still busy
        then is left to its daemon thread and shown as failed."""
        deadline = time.monotonic() + timeout_s
        for t in self.threads:
            with contextlib.suppress(queue.Full):  # still busy: shown as failed below
                t.queue.put(("finish", None, run_state), timeout=max(0.0, deadline - time.monotonic()))
        for t in self.threads:
            t.thread.join(max(0.0, deadline - time.monotonic()))
            if t.thread.is_alive():
                t.last_error = f"did not finish within {timeout_s:.0f} s of the run's end ({t.last_error or 'busy'})"
                t.state = FAILED
                try:
                    services.record_status(t.run.run_id, t.name, **t.fields())
                except Exception:  # noqa: BLE001
                    log.warning("run %s: could not write the %s mirror's status", t.run.run_id, t.name, exc_info=True)


class MirroredReporter:
    """The studio's reporter first (everything is persisted whatever the trackers do), then each tracker's
    queue, without waiting. Everything else (flush, log_tail...) is the studio reporter's."""

    def __init__(self, inner: Reporter, mirror: Mirror) -> None:
        self.inner = inner
        self.mirror = mirror

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.inner.metrics(step, values)
        self.mirror.put(("metrics", int(step), {str(k): float(v) for k, v in values.items()}))

    def rollouts(self, step: int, rollouts: list[Rollout]) -> None:
        self.inner.rollouts(step, rollouts)
        self.mirror.put(("rollouts", int(step), list(rollouts)))

    def status(self, state: str, detail: str = "") -> None:
        self.inner.status(state, detail)

    def checkpoint(self, step: int, path: str) -> None:
        self.inner.checkpoint(step, path)

    def log(self, line: str) -> None:
        self.inner.log(line)

    def warning(self, step: int | None, message: str) -> None:
        self.inner.warning(step, message)

    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None:
        self.inner.prompt_stats(step, stats)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def run_info(run: Run) -> RunInfo:
    experiment = run.experiment.name if run.experiment_id and run.experiment else ""
    config = {
        "studio": {
            "run_id": run.pk,
            "run": run.name,
            "team": run.team.name,
            "experiment": experiment,
            "kind": run.kind,
        },  # fmt: skip
        "spec": run.spec,
    }
    folder = Path(settings.DATA_DIR) / "runs" / str(run.pk) / "mirrors"
    return RunInfo(run_id=run.pk, name=run.name, team=run.team.name, experiment=experiment, kind=run.kind,
                   config=config, folder=folder, attempt=run.restarts)  # fmt: skip


def start(run: Run) -> Mirror | None:
    """The run's mirror, its threads started; None when it mirrors to nothing. Never raises: settings
    that no longer hold (a secret deleted since) show on the run page as each tracker's failure."""
    try:
        chosen = services.settings_for_run(run)
    except Exception as exc:  # noqa: BLE001
        unchecked = _unchecked_settings(run)
        for name in unchecked.enabled() if unchecked else []:
            services.record_status(run.pk, name, state=FAILED, last_error=f"not mirrored: {exc}"[:ERROR_CHARS])
        log.warning("run %s: not mirrored: %s", run.pk, exc)
        return None
    names = chosen.enabled()
    if not names:
        return None
    info = run_info(run)
    threads = []
    for name in names:
        services.record_status(run.pk, name, state=STARTING, steps_sent=0, rollouts_sent=0, failures=0, dropped=0,
                               last_error="", location="")  # fmt: skip
        threads.append(TrackerThread(name, info, run.team_id, chosen))
    return Mirror(threads)


def _unchecked_settings(run: Run) -> MirrorSettings | None:
    try:
        if run.experiment_id:
            return services.experiment_settings(run.experiment)[1]
        return services.team_defaults(run.team)
    except Exception:  # noqa: BLE001
        return None
