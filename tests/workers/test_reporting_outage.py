"""A run's reports and heartbeats go on through a database outage (workers.reporting, workers.tasks,
workers.gpu): nothing reported while the database is away is lost or written twice.

On PostgreSQL (the team-scale pass) the outages are real: the worker's backend is terminated with
pg_terminate_backend from another connection, and the database refuses new connections for a while
(ALTER DATABASE ... ALLOW_CONNECTIONS false). On SQLite (the first pass) the database is a file of the
same process, with no server to lose: the outage there is another connection holding the write lock.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, connections
from django.test import override_settings
from django.utils import timezone

from studio.fleet.models import WorkerNode
from studio.runs.models import MetricPoint, Run, RunEvent
from studio.runs.models import Rollout as RolloutRow
from tests.studio import people
from trainers.report import Rollout
from workers import gpu, reporting, tasks
from workers.reporting import DatabaseReporter, ReportsNotWritten

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'",
                                   reason="SQLite has no server whose connections can be lost")  # fmt: skip
sqlite_only = pytest.mark.skipif("connection.vendor != 'sqlite'", reason="a SQLite write lock")


def make_run(**fields) -> Run:
    # no automatic restart: a run the sweeper ends stays failed (studio.runs.lifecycle.restart)
    spec = {"checkpoint": {"max_restarts": 0}}
    return Run.objects.create(team=people.the_team(), name="r", spec=spec, state="running", **fields)


def rollout(step: int, i: int) -> Rollout:
    return Rollout(step=step, prompt_id="p1", sample_index=i, prompt="Say a", completion="a", reward=float(i))


def report_step(reporter: DatabaseReporter, step: int) -> None:
    """A step as the trainer reports it: metrics, a log line, then its rollouts (which flush)."""
    reporter.metrics(step, {"reward/mean": step / 10, "actor/loss": -step})
    reporter.log(f"step {step}")
    reporter.rollouts(step, [rollout(step, 0), rollout(step, 1)])


def assert_stored_once(run: Run, steps: int) -> None:
    """Every step's rows exactly once, and the run's events gap-free in report order."""
    points = sorted(MetricPoint.objects.filter(run=run).values_list("step", "key"))
    assert points == sorted((s, k) for s in range(1, steps + 1) for k in ("reward/mean", "actor/loss"))
    rollouts = sorted(RolloutRow.objects.filter(run=run).values_list("step", "sample_index"))
    assert rollouts == [(s, i) for s in range(1, steps + 1) for i in (0, 1)]
    stored = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", "kind", "step"))
    assert [seq for seq, _, _ in stored] == list(range(1, 3 * steps + 1))
    assert [(kind, step) for _, kind, step in stored] == [
        (kind, s if kind != "log" else None) for s in range(1, steps + 1) for kind in ("metrics", "log", "rollouts")
    ]
    run.refresh_from_db()
    assert (run.last_seq, run.last_step) == (3 * steps, steps)


def receive(layer, channel: str, count: int) -> list[dict]:
    """`count` messages, received in one event loop (channels_redis delivers a message again when the
    loop that received it ends before its backup copy is cleaned)."""

    async def messages() -> list[dict]:
        return [await layer.receive(channel) for _ in range(count)]

    return async_to_sync(messages)()


def outage_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "workers.reporting" and r.levelno == logging.WARNING]


# --- PostgreSQL: a real server, really lost ----------------------------------------------------


def admin():
    """A connection of our own to the server's `postgres` database, out of the worker's reach."""
    import psycopg

    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"] or None, port=s["PORT"] or None, user=s["USER"],
                           password=s["PASSWORD"] or None, dbname="postgres", autocommit=True)  # fmt: skip


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def terminate(*pids: int) -> None:
    with admin() as conn:
        for pid in pids:
            assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0], f"no backend {pid}"


def other_backends() -> list[int]:
    """The test database's backends other than this thread's (a worker thread's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return [pid for (pid,) in cursor.fetchall()]


@contextmanager
def database_away():
    """The test database refuses new connections, and its backends are terminated, until exit
    (this thread's too: it is closed on exit, so that the test's next query opens a new one)."""
    name = connection.settings_dict["NAME"]
    with admin() as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            yield
        finally:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            connection.close()


@postgres_only
def test_reports_made_while_the_connection_was_dropped_are_stored_once_and_published(monkeypatch, caplog):
    monkeypatch.setattr(reporting, "RETRY_FIRST_S", 60.0)  # no second try before the explicit flush below
    run = make_run()
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(f"run-{run.pk}", channel)
    reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
    report_step(reporter, 1)
    assert RunEvent.objects.filter(run=run).count() == 3

    terminate(backend_pid())  # between two flushes, as a server restart or a failover does
    with caplog.at_level(logging.WARNING, logger="workers.reporting"):
        report_step(reporter, 2)  # its flush fails: kept
        assert len(reporter.pending) == 3
        report_step(reporter, 3)  # before the next try is due: kept behind step 2
        assert [kind for kind, _, _ in reporter.pending] == ["metrics", "log", "rollouts"] * 2
        assert MetricPoint.objects.filter(run=run, step__gt=1).count() == 0  # a new connection: nothing of 2, 3
        reporter.flush()
    assert reporter.pending == [] and reporter.pending_rows == 0
    assert_stored_once(run, steps=3)
    [lost, back] = outage_warnings(caplog)  # one for the outage, one when it ended: not one per try
    assert "could not write its reports" in lost and "3 kept" in lost
    assert "reachable again" in back
    # published once the database took them: step 1's flush, then one message with steps 2 and 3
    assert [[e["seq"] for e in m["events"]] for m in receive(layer, channel, 2)] == [[1, 2, 3], list(range(4, 10))]


@postgres_only
def test_the_end_of_run_flush_retries_through_an_outage_then_writes(caplog):
    run = make_run()
    reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
    report_step(reporter, 1)
    name = connection.settings_dict["NAME"]
    with admin() as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        terminate(backend_pid())
        reopen = threading.Timer(2.0, lambda: conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        try:
            with caplog.at_level(logging.WARNING, logger="workers.reporting"):
                report_step(reporter, 2)  # fails at once: kept
                reopen.start()
                started = time.monotonic()
                reporter.flush()  # the run's last flush: keeps trying until the database takes new connections
                waited = time.monotonic() - started
        finally:
            reopen.join()
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    assert waited > 1.0
    assert_stored_once(run, steps=2)
    assert len(outage_warnings(caplog)) == 2  # lost, back: however many tries between


@postgres_only
def test_the_end_of_run_flush_gives_up_after_its_bound_with_a_clear_error(monkeypatch):
    monkeypatch.setattr(reporting, "FINAL_FLUSH_RETRY_S", 1.5)
    run = make_run()
    reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
    report_step(reporter, 1)
    with database_away():
        report_step(reporter, 2)
        started = time.monotonic()
        with pytest.raises(ReportsNotWritten) as raised:
            reporter.flush()
        assert 1.5 <= time.monotonic() - started < 10
    message = str(raised.value)
    assert f"run {run.pk}: 3 reports (7 rows) could not be written: the database was unreachable" in message
    assert "not currently accepting connections" in message  # why, as the server said it
    assert len(reporter.pending) == 3  # still kept: a later flush writes them
    reporter.flush()
    assert_stored_once(run, steps=2)


@postgres_only
def test_the_run_heartbeat_keeps_stamping_through_an_outage(caplog):
    run = make_run(heartbeat=timezone.now())
    with override_settings(HEARTBEAT_INTERVAL_S=0.05), caplog.at_level(logging.WARNING, logger="workers.tasks"):
        stop = tasks._start_heartbeat(run.pk)
        try:
            wait_for(lambda: other_backends(), "the heartbeat thread's connection")
            with database_away():
                time.sleep(0.5)  # several beats fail meanwhile
                outage_ended = timezone.now()
            wait_for(lambda: Run.objects.get(pk=run.pk).heartbeat > outage_ended, "a heartbeat after the outage")
        finally:
            stop.set()
    messages = [r.getMessage() for r in caplog.records if r.name == "workers.tasks"]
    assert len([m for m in messages if "heartbeat failed" in m]) == 1, messages
    assert len([m for m in messages if "stamped again" in m]) == 1, messages


@postgres_only
def test_the_fleet_heartbeat_survives_an_outage_and_sweeps_only_after_runs_could_beat_again(caplog):
    gpu.record_start("gpu@test-host", ["gpu"], concurrency=1)
    # a run whose heartbeat is stale by the time the database is back (its worker could not write it)
    run = make_run(heartbeat=timezone.now() - timedelta(hours=1), worker="gpu@elsewhere")
    heartbeat = gpu.Heartbeat("gpu@test-host", ["gpu"], 1, interval=0.05, sweep_grace_s=3.0)
    with caplog.at_level(logging.WARNING, logger="workers.gpu"):
        with database_away():
            heartbeat.start()
            time.sleep(0.5)  # its beats fail
        try:
            before = WorkerNode.objects.get().last_seen
            wait_for(lambda: WorkerNode.objects.get().last_seen > before, "a fleet beat after the outage")
            assert Run.objects.get(pk=run.pk).state == "running"  # not swept right after the outage
            wait_for(lambda: Run.objects.get(pk=run.pk).state == "failed", "the sweep after the grace", timeout=20)
        finally:
            heartbeat.stop()
    messages = [r.getMessage() for r in caplog.records if r.name == "workers.gpu"]
    assert len([m for m in messages if "fleet heartbeat failed" in m]) == 1, messages


def wait_for(check, what: str, timeout: float = 10):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"no {what} in {timeout} s"
        time.sleep(0.05)
    return value


# --- both databases ----------------------------------------------------------------------------


@sqlite_only
def test_reports_wait_while_another_connection_holds_the_write_lock(caplog):
    """SQLite's outage: the file's write lock held by another connection (here the test database's
    shared cache, which answers SQLITE_LOCKED at once; a database file answers SQLITE_BUSY after the
    busy timeout). The reports wait, in order, and are written once when the lock is released."""
    run = make_run()
    reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
    report_step(reporter, 1)
    other = sqlite3.connect(connection.settings_dict["NAME"], uri=True, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE runs_run SET name = 'held' WHERE id = ?", (run.pk,))
        with caplog.at_level(logging.WARNING, logger="workers.reporting"):
            report_step(reporter, 2)
            report_step(reporter, 3)
            assert len(reporter.pending) == 6
            other.execute("ROLLBACK")
            reporter.flush()
    finally:
        other.close()
    assert_stored_once(run, steps=3)
    [locked, back] = outage_warnings(caplog)
    assert "locked" in locked and "reachable again" in back


@contextmanager
def commit_fails_once(commit_first: bool):
    """This thread's next COMMIT raises what a dropped connection raises, after the server committed
    (`commit_first`: only the answer was lost) or instead of committing (rolled back)."""
    db = connections[DEFAULT_DB_ALIAS]

    def failing_commit() -> None:
        del db.commit  # once: the class's commit again
        db.commit() if commit_first else db.rollback()
        raise OperationalError("server closed the connection unexpectedly")

    db.commit = failing_commit
    try:
        yield
    finally:
        db.__dict__.pop("commit", None)


def test_a_commit_whose_answer_was_lost_is_not_written_again():
    """The connection breaks during COMMIT: the server may have committed, and the reporter cannot
    tell from the error. The next flush looks for the batch's last event before writing again.
    (Not made real: losing only the answer to a COMMIT needs a network fault at that instant; the
    commit here is real, and the error a dropped connection raises follows it.)"""
    run = make_run()
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(f"run-{run.pk}", channel)
    reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
    with commit_fails_once(commit_first=True):
        report_step(reporter, 1)  # written, though the reporter was told otherwise
    assert reporter.unconfirmed is not None and len(reporter.pending) == 3
    reporter.flush()
    assert_stored_once(run, steps=1)
    assert reporter.pending == [] and reporter.unconfirmed is None
    # published once it was known to be stored
    assert [e["seq"] for e in async_to_sync(layer.receive)(channel)["events"]] == [1, 2, 3]
    report_step(reporter, 2)
    assert_stored_once(run, steps=2)


def test_a_commit_that_failed_before_the_server_committed_is_written_on_the_next_try():
    run = make_run()
    reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
    with commit_fails_once(commit_first=False):
        report_step(reporter, 1)
    assert RunEvent.objects.filter(run=run).count() == 0
    reporter.flush()
    assert_stored_once(run, steps=1)


@pytest.mark.parametrize("field, value", [("finish_reason", None), ("reward", "high")])
def test_a_bad_value_still_raises_at_once_and_its_batch_is_dropped(field, value):
    """Not an outage: a NOT NULL column given None (IntegrityError, on either database) or a reward
    that is no number (ValueError, before any SQL). Raised at once, its batch dropped as before, so
    the run's failure (its traceback, a log line) can still be written after it."""
    run = make_run()
    reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
    reporter.log("before")
    bad = rollout(1, 0)
    setattr(bad, field, value)
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        reporter.rollouts(1, [bad])
    assert not isinstance(raised.value, ReportsNotWritten) and time.monotonic() - started < 5
    assert reporter.pending == [] and reporter.unconfirmed is None
    reporter.log("after")
    reporter.flush()
    assert list(RunEvent.objects.filter(run=run).values_list("seq", "payload")) == [(1, {"line": "after"})]


def test_rows_waiting_past_the_bound_are_kept_and_said_in_a_log_line(monkeypatch, caplog):
    monkeypatch.setattr(reporting, "PENDING_WARN_ROWS", 3)
    run = make_run()
    reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
    reporter.retry_at = time.monotonic() + 3600  # as if the database were away: no flush is tried
    with caplog.at_level(logging.WARNING, logger="workers.reporting"):
        for step in range(1, 5):
            reporter.metrics(step, {"a": 1.0, "b": 2.0})
    assert reporter.pending_rows == 8
    warned = outage_warnings(caplog)
    assert [w.split(":")[1].strip().split()[0] for w in warned] == ["4", "6"]  # at 3 rows (4), then 6
    reporter.flush()
    assert MetricPoint.objects.filter(run=run).count() == 8
