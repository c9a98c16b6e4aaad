"""Celery tasks, registered by name; the studio sends them with `send_task`.

- workers.run_training / workers.run_eval: turn a Run row into a RunSpec, lease its GPUs and start it
  (workers.launch; a run whose GPUs are not all free goes back to the queue for GPU_WAIT_RETRY_S),
  call the trainer (`train` / `evaluate`) with a DatabaseReporter and a cancel check, here or as
  several processes (workers.launch.run_processes), heartbeat while it runs, and record how it ended
  (with the error and the last log lines on failure).
- workers.score_rubric: the rubric editor's "try it"; user code runs in the trainer's
  sandbox here, never in the web process.
- workers.try_environment: the environment editor's "try it": a few episodes with a model
  or checkpoint, through the training's multi-turn rollout code (tools in the sandbox).
- workers.check_dataset: read every row of a dataset whose file is longer than the upload
  request reads (studio.datasets.checks), off the web tier's request path.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import socket
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import connection

from studio.accounts.models import Team
from studio.celery import SCORING_STATE, TRYING_STATE
from studio.experiments import paths
from studio.fleet import leases
from studio.runs import lifecycle, placement, usage
from studio.runs.models import CANCELLED, FAILED, INTERRUPTED, SUCCEEDED, Run
from trainers.report import PlainFailure, failure_detail
from trainers.scale import memory_share
from workers import launch, mirroring, provenance
from workers.outages import database_unreachable, drop_connection
from workers.reporting import CancelCheck, DatabaseReporter, UsageMeter

log = logging.getLogger(__name__)


@shared_task(name="workers.run_training", bind=True, max_retries=None)
def run_training(self, run_id: int) -> str:
    return _execute_or_wait(self, run_id)


@shared_task(name="workers.run_eval", bind=True, max_retries=None)
def run_eval(self, run_id: int) -> str:
    return _execute_or_wait(self, run_id)


def _execute_or_wait(task, run_id: int) -> str:
    try:
        return execute_run(run_id, _hostname(task))
    except launch.GpusBusy:
        # Back to the queue, not a wait here: this pool process serves other runs meanwhile, and any
        # worker whose GPUs are free may take the run next time.
        raise task.retry(countdown=settings.GPU_WAIT_RETRY_S) from None


@shared_task(name="workers.score_rubric", bind=True)
def score_rubric(self, rubric_spec: dict[str, Any], pairs: list[dict[str, Any]],
                 team_id: int | None = None) -> dict[str, Any]:  # fmt: skip
    """{"results": [{reward, passed, error, scores: {name: {score, explanation, error}}}]} or {"error": "..."}.

    While it scores, the task's state is SCORING with {"running": [criterion names], "pairs": n}, so
    a caller that gives up waiting can say which criterion was still running (not "no worker").
    A judge's model path and endpoint are checked for the team (`team_id`) first, by the path policy."""
    from trainers.rewards.rubric import score_pairs

    refused = paths.rubric_errors(rubric_spec, _team(team_id))
    if refused:
        return {"error": "; ".join(f"{k}: {v}" for k, v in refused.items())}

    def progress(running: list[str]) -> None:
        if self.request.id:  # None when called directly, not through a worker
            self.update_state(state=SCORING_STATE, meta={"running": running, "pairs": len(pairs)})

    try:
        results = score_pairs(rubric_spec, pairs, progress)
    except ValueError as exc:  # a bad rubric or a bad pair: the caller shows the message
        return {"error": str(exc)}
    return {
        "results": [
            {
                "reward": r.reward,
                "passed": r.passed,
                "error": r.error,
                "scores": {
                    n: {"score": s.score, "explanation": s.explanation, "error": s.error} for n, s in r.scores.items()
                },
            }
            for r in results
        ]
    }


@shared_task(name="workers.try_environment", bind=True)
def try_environment(self, config: dict[str, Any], model: dict[str, Any], rows: list[dict[str, Any]],
                    episodes: int, team_id: int | None = None) -> dict[str, Any]:  # fmt: skip
    """{"episodes": [[{messages, turns, end_reason, error, final_text}]]} or {"error": "..."}.

    While it works, the task's state is TRYING with {"stage": "loading the model" | "running episodes"},
    so a caller that gives up waiting can say where it was (not "no worker")."""
    from workers.trying import try_episodes

    def progress(stage: str) -> None:
        if self.request.id:  # None when called directly, not through a worker
            self.update_state(state=TRYING_STATE, meta={"stage": stage})

    # The paths again, for the team: the files may have changed since the studio checked them.
    team = _team(team_id)
    refused = paths.environment_errors(config, team)
    for key in ("model_path", "checkpoint"):
        error = paths.model_path_error(model[key], team) if model.get(key) else None
        if error:
            refused[key] = error
    if refused:
        return {"error": "; ".join(f"{k}: {v}" for k, v in refused.items())}
    try:
        return try_episodes(config, model, rows, episodes, progress)
    except (ValueError, OSError) as exc:  # a bad config, model folder (ModelFolderError) or row: the page shows it
        return {"error": f"{type(exc).__name__}: {exc}"}


@shared_task(name="workers.check_dataset")
def check_dataset(dataset_id: int, generation: int) -> str:
    """Check every row of a dataset; returns the status it ended in (or "superseded")."""
    from studio.datasets import checks
    from studio.datasets.models import Dataset

    try:
        return checks.check_every_row(dataset_id, generation)
    except Exception as exc:  # noqa: BLE001 - a dataset left "checking" forever would hide the failure
        log.exception("the check of dataset %s failed", dataset_id)
        dataset = Dataset.objects.filter(pk=dataset_id).first()
        if dataset is None:
            return checks.SUPERSEDED
        reason = f"the check failed on the worker ({type(exc).__name__}: {exc}); save the mapping to check again"
        return checks.refuse(dataset, generation, reason, keep_file=True)


def _team(team_id: Any):
    """The team a try is for; None (only what any team may read) when not given."""
    return Team.objects.filter(pk=team_id).first() if isinstance(team_id, int) else None


def _hostname(task) -> str:
    return getattr(task.request, "hostname", None) or socket.gethostname()


def run_spec(run: Run):
    """The RunSpec for a run, with its output folder under this worker's data dir."""
    from trainers.spec import RunSpec

    config = dict(run.spec)
    checkpoint = dict(config.get("checkpoint") or {})
    checkpoint["output_dir"] = str(Path(settings.DATA_DIR) / "runs" / str(run.pk))
    config["checkpoint"] = checkpoint
    config["name"] = run.name
    return RunSpec.model_validate(config)


def execute_run(run_id: int, worker: str) -> str:
    """Run one queued run to its end; returns its final state (or why it did not start)."""
    # Celery's Django fix-up closes stale database connections around each task.
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        log.warning("run %s does not exist (deleted, or another database)", run_id)
        return "missing"
    # Its GPUs leased and the fairest queued run started (this one, or another in its place), or GpusBusy.
    claimed = launch.claim_fairly(run, worker)
    if claimed is None:
        return "not-queued"
    run, devices = claimed
    run_id = run.pk
    run.refresh_from_db(fields=["restarts"])
    # The attempt this task runs: a restart begins a newer one, and this one then stops and ends nothing.
    check = CancelCheck(run_id, attempt=run.restarts)
    reporter = DatabaseReporter(run_id, attempt=run.restarts)
    # Its devices are its from here (claimed, leased) until it ends: what its usage counts.
    reporter.meter = UsageMeter(
        run_id, run.restarts, usage.processes(run.spec, run.kind, devices, leases.part_of(run_id))
    )
    reporter.stop_check = check  # its worker's shutdown is logged as that, not as a cancel
    # Trackers the run mirrors to (studio.tracking): fed off the training thread, never waited for.
    mirror = mirroring.start(run)
    stop_beat = _start_heartbeat(run_id)
    state = FAILED
    try:
        with interrupted_by_signals(check), memory_share.share(leases.part_of(run_id)):  # a shared GPU's part
            state = _execute(run, devices, mirror.wrap(reporter) if mirror else reporter, check)
            return state
    finally:
        stop_beat.set()
        leases.release(run_id)  # finish released them; this covers a run the sweeper ended first
        if mirror is not None:  # after the run has ended in the studio: the trackers send what waits, then finish
            mirror.close(state)


def _execute(run: Run, devices: list[str], reporter: DatabaseReporter, check: CancelCheck) -> str:
    """Train or evaluate here or as several processes, then end the run as its result says."""
    run_id, attempt = run.pk, check.attempt
    reported = False  # True while train/evaluate run: they put their own failure's traceback in the log
    try:
        # The path policy again, right before the run reads anything: files may have changed since launch.
        paths.refuse(paths.policy_errors(run.spec, run.team))
        # What produced the run, recorded as it starts; it trains on the data as snapshotted then.
        spec = provenance.record(run, run_spec(run), devices)
        if placement.launcher(run.spec, run.kind) != placement.IN_PROCESS:
            result = launch.run_processes(run, spec, reporter, check, devices)
        elif run.kind == "eval":
            from trainers.run.evaluate import evaluate

            reported = True
            result = evaluate(spec, reporter, check)
        else:
            from trainers.run.loop import train

            reported = True
            result = train(spec, reporter, check)
        reported = False
        reporter.flush()
        _final_usage(reporter)
        detail = getattr(result, "detail", "") or f"{result.status}"
        if result.status == "cancelled" and check.interrupted:
            where = f"; checkpoint {result.checkpoint}" if getattr(result, "checkpoint", None) else ""
            lifecycle.interrupt(run_id, f"interrupted: its worker shut down ({detail}{where}); it resumes when a "
                                        "worker starts again (the next `./studioctl up`)", attempt=attempt)  # fmt: skip
            return INTERRUPTED
        state = {"succeeded": SUCCEEDED, "cancelled": CANCELLED}.get(result.status, FAILED)
        error = "" if state != FAILED else _failure_text(detail, reporter)
        lifecycle.finish(run_id, state, detail=detail, error=error, attempt=attempt)
        return state
    except BaseException as exc:  # noqa: BLE001 - any failure of the run is recorded on the run
        # BaseException: torch's distributed checkpoint raises CheckpointException, a BaseException (a disk
        # that fills while a checkpoint is written), which used to leave the run "running" until the sweeper
        # failed it as lost and restarted it into the same failure. Only the interpreter's own exits pass.
        if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        log.exception("run %s failed", run_id)
        if not reported:
            reporter.log(traceback.format_exc())
        try:
            reporter.flush()
        except Exception:  # noqa: BLE001 - the database may be the problem; the error text still goes in below
            log.exception("could not flush the last reports of run %s", run_id)
        # A failure that explains itself in one line (a model the Hub would not give) is the run's error
        # alone; the traceback is in the log either way.
        detail = failure_detail(exc) + disk_full_note(Path(settings.DATA_DIR) / "runs" / str(run_id))
        error = detail if isinstance(exc, PlainFailure) else _failure_text(detail, reporter)
        _final_usage(reporter)
        lifecycle.finish(run_id, FAILED, error=error, attempt=attempt)
        return FAILED


def _final_usage(reporter: DatabaseReporter) -> None:
    """The attempt's usage, final, before the run ends (the page that shows it ended shows it whole). A run
    ends whatever happens here: the usage written with its last batch stays."""
    if reporter.meter is None:
        return
    try:
        reporter.meter.write(final=True)
    except Exception:  # noqa: BLE001 - the database may be away; the run must still end
        log.exception("run %s: could not write its final usage", reporter.run_id)


DISK_NEARLY_FULL_BYTES = 64 * 1024 * 1024


def disk_full_note(folder: Path) -> str:
    """What a failed run's error adds when under DISK_NEARLY_FULL_BYTES are free where its folder is: a write
    that ran out of space often says so only as a library's own error (torch's zip writer: "unexpected pos
    704 vs 598"); "" otherwise."""
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None:
        return ""
    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        return ""
    if free >= DISK_NEARLY_FULL_BYTES:
        return ""
    return f" (the disk that holds the run's folder is full: {free / 2**20:.1f} MiB free)"


@contextlib.contextmanager
def interrupted_by_signals(check: CancelCheck):
    """While a run executes in this process, SIGTERM or SIGINT (the worker's process group stopped:
    a deploy, preemption, the studio's Ctrl-C) interrupts it at the next step boundary, where it saves
    a checkpoint, instead of killing it (Celery's pool processes die of SIGTERM by default). Only the
    main thread may set handlers: elsewhere (a thread pool) the worker's own shutdown still reaches
    the run through `interrupt_requested` (workers.gpu)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:  # noqa: ARG001
        check.interrupt()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _failure_text(message: str, reporter: DatabaseReporter) -> str:
    tail = "\n".join(list(reporter.log_tail)[-20:])
    return f"{message}\n\nlast log lines:\n{tail}" if tail else message


def _start_heartbeat(run_id: int) -> threading.Event:
    """A thread that stamps Run.heartbeat every HEARTBEAT_INTERVAL_S while the run goes on.

    A beat that fails (the database away, the connection dropped) does not end the thread: the
    sweeper would declare a healthy run lost. The broken connection is closed, one warning is
    logged for the whole outage, and the next beat tries on a new connection."""
    stop = threading.Event()

    def beat() -> None:
        failing_since: float | None = None
        try:
            while not stop.wait(settings.HEARTBEAT_INTERVAL_S):
                try:
                    lifecycle.beat(run_id)
                except Exception as exc:  # noqa: BLE001 - keep beating; the next beat may succeed
                    drop_connection()
                    if failing_since is None:
                        failing_since = time.monotonic()
                        log.warning("run %s: heartbeat failed (%s: %s); beating on", run_id, type(exc).__name__,
                                    exc, exc_info=not database_unreachable(exc))  # fmt: skip
                    continue
                if failing_since is not None:
                    log.warning("run %s: heartbeat stamped again after %.0f s", run_id,
                                time.monotonic() - failing_since)  # fmt: skip
                    failing_since = None
        finally:
            connection.close()

    threading.Thread(target=beat, name=f"heartbeat-{run_id}", daemon=True).start()
    return stop
