"""The relay between a run's ranks and its task (workers.relay, trainers.scale.remote), with ranks played by
links in this process: rank 0's reports arrive once, a stop reaches rank 0, strangers are refused, and
every rank is watched (an error, or a connection that closes before the rank said it was done)."""

from __future__ import annotations

import socket
import time

import pytest

from trainers.models import hub
from trainers.report import CriterionScore, MemoryReporter, Rollout
from trainers.scale.remote import Link, encode, reporter_over
from workers.relay import Relay
from workers.torchrun import failure_message, root_cause, torchrun_failures


class Done:
    status, detail, steps = "succeeded", "2 steps", 2


@pytest.fixture
def relay():
    stop = {"now": False}
    relay = Relay(MemoryReporter(), lambda: stop["now"], world_size=2)
    relay.stop_now = stop
    yield relay
    relay.close()


def connect(relay: Relay, rank: int) -> Link:
    env = relay.env()
    return Link.connect(env["ROLLOUT_RELAY"], env["ROLLOUT_RELAY_TOKEN"], rank)


def pump_until(relay: Relay, check, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "the relay did not get there"
        relay.pump(0.05)
    return value


def test_rank_zeros_reports_arrive_once_and_every_rank_says_when_it_is_done(relay):
    ranks = [connect(relay, 0), connect(relay, 1)]
    reporter = reporter_over(ranks[0])
    reporter.metrics(1, {"reward/mean": 0.5})
    rollout = Rollout(step=1, prompt_id="p", sample_index=0, prompt="say a", completion="a", reward=1.0,
                      scores={"letter": CriterionScore(1.0, "1 of 1")})  # fmt: skip
    reporter.rollouts(1, [rollout])
    reporter.log("step 1/2")
    reporter_over(ranks[1]).metrics(1, {"reward/mean": 0.9})  # not rank 0: never reported
    for link in ranks:
        link.done(Done())
    result = pump_until(relay, lambda: relay.result)
    assert result == {"status": "succeeded", "detail": "2 steps", "steps": 2}
    memory = relay.reporter
    assert memory.metric_points == [(1, {"reward/mean": 0.5})]
    assert memory.rollout_batches == [(1, [rollout])]
    assert "step 1/2" in memory.lines
    assert sorted(line[:21] for line in memory.lines if " started: pid " in line) == [
        "rank 0 of 2 started: ", "rank 1 of 2 started: "]  # fmt: skip
    assert relay.failures == []


def test_a_cancel_reaches_rank_zero_only(relay):
    ranks = [connect(relay, 0), connect(relay, 1)]
    pump_until(relay, lambda: len(relay.ranks) == 2)
    relay.stop_now["now"] = True
    relay.pump(0.05)
    deadline = time.monotonic() + 5
    while not ranks[0].should_stop() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ranks[0].should_stop() and not ranks[1].should_stop()  # the others agree through any_process


def test_a_connection_without_the_runs_token_is_refused(relay):
    host, port = relay.env()["ROLLOUT_RELAY"].rsplit(":", 1)
    stranger = socket.create_connection((host, int(port)))
    stranger.sendall(encode({"hello": "guess", "rank": 0, "pid": 1, "host": "x"}))
    pump_until(relay, lambda: relay.rounds > 20)
    assert relay.ranks == {} and relay.failures == []
    assert stranger.recv(1) == b""  # closed on it


def test_a_rank_that_vanishes_is_named_before_the_peer_whose_collective_then_failed(relay):
    ranks = [connect(relay, 0), connect(relay, 1)]
    pump_until(relay, lambda: len(relay.ranks) == 2)
    ranks[1].sock.shutdown(socket.SHUT_RDWR)  # killed: the kernel closes its socket
    try:
        raise RuntimeError("Connection closed by peer")
    except RuntimeError as exc:
        ranks[0].error(exc)  # its collective failed because rank 1 went
    time.sleep(0.2)  # both reach the relay before its next look: one round sees them together
    pump_until(relay, lambda: len(relay.failures) == 2)
    assert relay.failures[0] == (1, "its process ended without finishing (killed, or crashed outside Python)")
    assert relay.failures[1] == (0, "RuntimeError: Connection closed by peer")


def test_a_rank_that_raises_is_named_with_its_error_and_its_traceback_logged(relay):
    connect(relay, 0)
    other = connect(relay, 1)
    try:
        raise ValueError("rank one broke")
    except ValueError as exc:
        other.error(exc)
    pump_until(relay, lambda: relay.failures)
    assert relay.failures == [(1, "ValueError: rank one broke")]
    assert any(line.startswith("rank 1: Traceback (most recent call last)") for line in relay.reporter.lines)


def test_a_ranks_plain_failure_is_the_runs_error_as_it_stands(relay, tmp_path):
    """A model no rank can download fails the run with the one line saying what to do, as in one process:
    no exception type, no rank in front (every rank would say the same)."""
    connect(relay, 0)
    other = connect(relay, 1)
    line = hub.failure_line("org/name", "huggingface.co cannot be reached from this worker")
    try:
        raise hub.ModelDownloadError(line)
    except hub.ModelDownloadError as exc:
        other.error(exc)
    pump_until(relay, lambda: relay.failures)
    assert relay.failures == [(1, line)]
    assert failure_message(relay, 1, "", tmp_path) == (line, 1)


SUMMARY = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
trainers.scale.remote FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-26_04:05:26
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 12507)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 12507
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_04:05:25
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 12508)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 12508
============================================================
"""


def test_torchruns_failure_summary_names_each_failed_rank_and_the_root_cause():
    assert torchrun_failures(SUMMARY) == {0: "killed by SIGTERM (exit code -15)", 1: "killed by SIGKILL (exit code -9)"}
    assert root_cause(SUMMARY) == 1
    assert root_cause("no summary") is None


def test_the_ranks_get_their_gpus_and_the_relay_but_none_of_the_studios_secrets(monkeypatch):
    from workers.torchrun import ROOT, child_env

    monkeypatch.setenv("DATABASE_URL", "postgres://studio:secret@db/studio")
    monkeypatch.setenv("SECRET_KEY", "s3cret")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the pool process's own pinning
    env = child_env({"ROLLOUT_RELAY": "127.0.0.1:5", "ROLLOUT_RELAY_TOKEN": "t"}, ["2", "3"])
    assert "DATABASE_URL" not in env and "SECRET_KEY" not in env
    assert (env["CUDA_VISIBLE_DEVICES"], env["ROLLOUT_RELAY"]) == ("2,3", "127.0.0.1:5")
    assert env["PYTHONPATH"].split(":")[0] == str(ROOT)
