"""A stop asked for in the middle of a step ends the run within seconds (between two sampled tokens), not at
the end of the step, and keeps the last whole step's checkpoint (trainers.run.stopping). The completions are
long (MAX_TOKENS) so that a step takes far longer than the bound on this machine."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.trainers.helpers import tiny_spec
from trainers.report import STOP_NOW, MemoryReporter
from trainers.run import stopping
from trainers.run.loop import train

MAX_TOKENS = 1500  # a step of 2 x 4 such completions takes minutes on 2 shared cores (60 s per 400 tokens)
STOP_BOUND_S = 10.0  # from the stop's first true answer to train() returning


class StopAfter:
    """`should_stop` that says `answer` from its `asks`-th question on (the first is asked between steps, the
    rest inside the step, one per sampled token with the watch's interval at 0), and notes when. Counted, not
    timed: on a quiet machine the tiny model's step can end within any fixed delay."""

    def __init__(self, reporter: MemoryReporter, asks: int, answer: bool | str = True) -> None:
        self.reporter, self.asks, self.answer = reporter, asks, answer
        self.asked = 0
        self.stopped_at: float | None = None

    def __call__(self) -> bool | str:
        self.asked += 1
        if self.asked < self.asks:
            return False
        self.stopped_at = self.stopped_at or time.monotonic()
        return self.answer


@pytest.fixture(autouse=True)
def ask_at_every_token(monkeypatch):
    monkeypatch.setattr(stopping, "ASK_EVERY_S", 0.0)


def long_spec(model, tmp_path, **overrides):
    return tiny_spec(model, tmp_path, rollout={"max_new_tokens": MAX_TOKENS, "temperature": 3.0}, **overrides)


def test_a_stop_during_the_first_step_ends_it_within_seconds_with_no_checkpoint(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    stop = StopAfter(reporter, asks=20)  # the 19th token of step 1
    result = train(long_spec(tiny_model_path, tmp_path), reporter, should_stop=stop)
    took = time.monotonic() - stop.stopped_at
    print(f"stopped mid-step 1 in {took:.2f} s")
    assert took < STOP_BOUND_S
    assert result.status == "cancelled" and result.steps == 0
    assert reporter.states[-1] == ("cancelled", "stopped at step 0: no step had ended, so there is no checkpoint")
    assert reporter.metric_points == [] and reporter.rollout_batches == [] and reporter.checkpoints == []
    assert "stopped during step 1: its samples are dropped" in reporter.lines


def test_a_stop_during_a_later_step_keeps_the_last_whole_steps_checkpoint(tiny_model_path, tmp_path):
    first = MemoryReporter()
    done = train(tiny_spec(tiny_model_path, tmp_path / "a", optim={"total_steps": 1}), first)
    assert done.status == "succeeded" and [s for s, _ in first.checkpoints] == [1]
    step_1 = first.checkpoints[0][1]
    weights = {p.name: p.stat().st_mtime_ns for p in sorted(Path(step_1).rglob("*")) if p.is_file()}

    reporter = MemoryReporter()
    stop = StopAfter(reporter, asks=20)  # the 19th token of step 2
    spec = long_spec(tiny_model_path, tmp_path / "b", checkpoint={"resume_from": step_1})
    result = train(spec, reporter, should_stop=stop)
    took = time.monotonic() - stop.stopped_at
    print(f"stopped mid-step 2 in {took:.2f} s")
    assert took < STOP_BOUND_S
    assert result.status == "cancelled" and result.steps == 1 and result.checkpoint == step_1
    assert reporter.states[-1] == ("cancelled", "stopped at step 1: the step-1 checkpoint is kept")
    assert reporter.metric_points == []  # step 2 never ended: nothing of it was reported
    assert "stopped during step 2: its samples are dropped" in reporter.lines
    after = {p.name: p.stat().st_mtime_ns for p in sorted(Path(step_1).rglob("*")) if p.is_file()}
    assert after == weights  # the whole step's checkpoint, untouched by the dropped step


def test_stop_now_between_steps_saves_no_checkpoint(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    result = train(tiny_spec(tiny_model_path, tmp_path), reporter,
                   should_stop=lambda: STOP_NOW if reporter.metric_points else False)  # fmt: skip
    assert result.status == "cancelled" and result.steps == 1
    assert reporter.states[-1] == ("cancelled", "stopped at step 1: no checkpoint saved, as asked")
    assert reporter.checkpoints == [] and result.checkpoint is None
