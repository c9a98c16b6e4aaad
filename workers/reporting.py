"""The worker's Reporter: buffer what the trainer reports, write it in batches, then publish.

A flush is one transaction: MetricPoint / Rollout / RolloutScore rows plus the RunEvents
that describe them (seq allocated in `studio.runs.events`), published after commit.
Flushes happen when a step's rollouts arrive (the trainer reports them last, so they
close the step: its metrics, log lines and rollouts go in one write and reach the
browser together, without waiting for the next step), when FLUSH_INTERVAL_S has passed
or FLUSH_ROWS rows are waiting, on checkpoints and at the end. A fast tiny-model run
makes one write per step, not one per metric.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from django.db import transaction

from studio.runs import episodes, events, prompt_stats, prompts, texts
from studio.runs.models import (
    PREVIEW_CHARS,
    RUNNING,
    WARNING_CHARS,
    Checkpoint,
    MetricPoint,
    RolloutScore,
    Run,
    RunPrompt,
)
from studio.runs.models import Rollout as RolloutRow
from trainers.report import Rollout

FLUSH_INTERVAL_S = 0.5
FLUSH_ROWS = 2000
LOG_TAIL = 30


def without_nul(value: Any) -> Any:
    """PostgreSQL text and jsonb cannot hold NUL, which a sampling model can emit; show it as U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    return value


class DatabaseReporter:
    """Implements trainers.report.Reporter for one run."""

    def __init__(self, run_id: int, flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.run_id = run_id
        self.flush_interval_s = flush_interval_s
        self.pending: list[tuple[str, int | None, Any]] = []  # (kind, step, payload) in report order
        self.pending_rows = 0
        self.last_flush = time.monotonic()
        self.last_step = 0
        self.log_tail: deque[str] = deque(maxlen=LOG_TAIL)

    # --- Reporter protocol -------------------------------------------------------------
    def metrics(self, step: int, values: dict[str, float]) -> None:
        self._add("metrics", step, {k: float(v) for k, v in values.items()}, len(values))

    def rollouts(self, step: int, rollouts: list[Rollout]) -> None:
        self._add("rollouts", step, list(rollouts), len(rollouts) * 2)
        self.flush()

    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None:
        """Per-prompt statistics of the prompts the step drew (studio.runs.prompt_stats): written
        with the step's other rows, with a small `prompt_stats` event an open prompts view follows."""
        self._add("prompt_stats", step, [dict(s) for s in stats], len(stats))

    def status(self, state: str, detail: str = "") -> None:
        # The task owns the run's state (queued/running/final); the trainer's own status
        # reports become log lines so nothing it says is lost.
        self.log(f"[{state}] {detail}".rstrip())

    def checkpoint(self, step: int, path: str) -> None:
        self._add("checkpoint", step, {"path": str(path)}, 1)
        self.flush()

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
        if self.pending_rows >= FLUSH_ROWS or time.monotonic() - self.last_flush >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        pending, self.pending, self.pending_rows = self.pending, [], 0
        self.last_flush = time.monotonic()
        with transaction.atomic():
            items = [self._write(kind, step, payload) for kind, step, payload in pending]
            events.record(self.run_id, [item for item in items if item is not None], last_step=self.last_step)

    def _write(self, kind: str, step: int | None, payload: Any) -> events.EventItem | None:
        """Write the rows behind one reported item; returns its event (None: it has none)."""
        if kind == "prompt_stats":
            written = prompt_stats.record(self.run_id, step, without_nul(payload))
            return prompt_stats.event(step, written) if written else None
        if kind == "metrics":
            now = time.time()
            MetricPoint.objects.bulk_create(
                MetricPoint(run_id=self.run_id, step=step, key=k, value=v, wall_time=now) for k, v in payload.items()
            )
            return ("metrics", step, {"values": payload})
        if kind == "rollouts":
            run_prompts = self._prompts(payload)
            rows = RolloutRow.objects.bulk_create(
                self._rollout_row(r, p) for r, p in zip(payload, run_prompts, strict=True)
            )
            RolloutScore.objects.bulk_create(
                RolloutScore(rollout_id=row.pk, run_id=self.run_id, criterion=name, score=s["score"])
                for row in rows
                for name, s in row.scores.items()
            )
            return ("rollouts", step, {"items": [row.summary() for row in rows]})
        if kind == "checkpoint":
            Checkpoint.objects.create(run_id=self.run_id, step=step, path=payload["path"])
        if kind == "warning":  # the latest warning stays on the run: the runs list and the page header show it
            Run.objects.filter(pk=self.run_id).update(warning=payload["message"][:WARNING_CHARS])
        return (kind, step, payload)

    def _prompts(self, rollouts: list[Rollout]) -> list[RunPrompt]:
        """The RunPrompt of each rollout, written once per distinct prompt (see studio.runs.prompts)."""
        cleaned: dict[int, Any] = {}  # by object: a group's samples carry the same prompt object
        for r in rollouts:
            if id(r.prompt) not in cleaned:
                cleaned[id(r.prompt)] = without_nul(r.prompt)
        return prompts.upsert(self.run_id, [cleaned[id(r.prompt)] for r in rollouts])

    def _rollout_row(self, rollout: Rollout, run_prompt: RunPrompt) -> RolloutRow:
        completion = without_nul(rollout.completion)
        text = texts.plain(completion)
        scores = without_nul(
            {
                name: {"score": float(s.score), "explanation": s.explanation, "error": s.error}
                for name, s in rollout.scores.items()
            }
        )
        turns = without_nul(rollout.turns)
        return RolloutRow(
            run_id=self.run_id, step=rollout.step, prompt_id=str(rollout.prompt_id), sample_index=rollout.sample_index,
            run_prompt=run_prompt, completion=completion, preview=text[:PREVIEW_CHARS],
            reward=float(rollout.reward), advantage=float(rollout.advantage), num_tokens=int(rollout.num_tokens),
            finish_reason=rollout.finish_reason, scores=scores, logprobs=rollout.logprobs, trained=rollout.trained,
            turns=turns, end_reason=rollout.end_reason or "", **episodes.columns(turns, rollout.end_reason),
            hinted=rollout.hint is not None, hint=without_nul(rollout.hint or ""), hint_fraction=rollout.hint_fraction,
            split=rollout.split,
        )  # fmt: skip


class CancelCheck:
    """`should_stop` for the trainer: true once the run's cancel is requested, or once the run is
    no longer running (the sweeper failed it as lost, or the studio was stopped): a run the studio
    has given up on must not keep a GPU busy. Reads the row at most once per `every_s`."""

    def __init__(self, run_id: int, every_s: float = 1.0) -> None:
        self.run_id = run_id
        self.every_s = every_s
        self.checked_at = 0.0
        self.cancelled = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self.cancelled and now - self.checked_at >= self.every_s:
            self.checked_at = now
            self.cancelled = not Run.objects.filter(pk=self.run_id, state=RUNNING, cancel_requested=False).exists()
        return self.cancelled
