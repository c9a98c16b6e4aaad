"""The rows behind what a run reports, written one way for every source.

The worker's Reporter (workers.reporting.DatabaseReporter) and the ingest API (studio.ingest, runs
streamed from TRL, imported from verl, posted by any client) both store metrics, rollouts, prompt
statistics, checkpoints, log lines and warnings through `write`: the same rows, the same derived
columns (previews, episode columns, per-criterion score rows) and the same event for the run's
stream, so a run's page, inspector, comparison and share links read them alike whatever produced
them. The caller owns the transaction and appends the events (studio.runs.events.record).
"""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction

from studio.runs import episodes, events, prompt_stats, prompts, signals, texts, token_data
from studio.runs.models import (
    PREVIEW_CHARS,
    WARNING_CHARS,
    Checkpoint,
    MetricPoint,
    RolloutScore,
    Run,
    RunPrompt,
)
from studio.runs.models import Rollout as RolloutRow
from trainers.report import Rollout


def without_nul(value: Any) -> Any:
    """PostgreSQL text and jsonb cannot hold NUL, which a sampling model can emit; show it as U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    return value


def version_spans(spans: list[list[int]] | None) -> list[list[int]] | None:
    """A rollout's [[version, tokens], ...] as plain ints (a tensor's or numpy's ints do not go into JSON)."""
    return None if spans is None else [[int(version), int(tokens)] for version, tokens in spans]


def write(
    run_id: int, kind: str, step: int | None, payload: Any, wall_time: float | None = None
) -> events.EventItem | None:
    """Write the rows behind one reported item (kind: metrics | rollouts | prompt_stats | checkpoint |
    log | warning | status); returns its event (None: it has none). `wall_time` (epoch seconds) of
    metric points: when they were measured, default now."""
    if kind == "prompt_stats":
        written = prompt_stats.record(run_id, step, without_nul(payload))
        return prompt_stats.event(step, written) if written else None
    if kind == "metrics":
        now = time.time() if wall_time is None else wall_time
        MetricPoint.objects.bulk_create(
            MetricPoint(run_id=run_id, step=step, key=k, value=v, wall_time=now) for k, v in payload.items()
        )
        keys = list(payload)
        written = lambda: signals.metrics_written.send(None, run_id=run_id, step=step, keys=keys)  # noqa: E731
        transaction.on_commit(written, robust=True)
        return ("metrics", step, {"values": payload})
    if kind == "rollouts":
        run_prompts = prompts_of(run_id, payload)
        rows = RolloutRow.objects.bulk_create(
            rollout_row(run_id, r, p) for r, p in zip(payload, run_prompts, strict=True)
        )
        RolloutScore.objects.bulk_create(
            RolloutScore(rollout_id=row.pk, run_id=run_id, criterion=name, score=s["score"])
            for row in rows
            for name, s in row.scores.items()
        )
        return ("rollouts", step, {"items": [row.summary() for row in rows]})
    if kind == "checkpoint":
        Checkpoint.objects.create(run_id=run_id, step=step, path=payload["path"])
    if kind == "warning":  # the latest step's warnings stay on the run: the runs list and the page header show them
        shown = Run.objects.filter(pk=run_id).values_list("warning", "warning_step").first()  # one writer per run
        if shown is not None:
            text = banner(shown[0], shown[1], step, payload["message"])
            Run.objects.filter(pk=run_id).update(warning=text, warning_step=step)
    return (kind, step, payload)


def banner(shown: str, shown_step: int | None, step: int | None, message: str) -> str:
    """The run's warnings once `message` came at `step`: every distinct one of that step, one a line, when the
    shown ones are of the same step (two checks firing at one step both show); else `message` alone (a later
    step's warnings replace an earlier step's, which the log keeps). Cut to WARNING_CHARS from the oldest line."""
    line = " ".join(message.split())
    lines = shown.splitlines() if shown and shown_step == step else []
    if line not in lines:
        lines.append(line)
    while len(lines) > 1 and len("\n".join(lines)) > WARNING_CHARS:
        lines.pop(0)
    return "\n".join(lines)[:WARNING_CHARS]


def prompts_of(run_id: int, rollouts: list[Rollout]) -> list[RunPrompt]:
    """The RunPrompt of each rollout, written once per distinct prompt (see studio.runs.prompts)."""
    cleaned: dict[int, Any] = {}  # by object: a group's samples carry the same prompt object
    for r in rollouts:
        if id(r.prompt) not in cleaned:
            cleaned[id(r.prompt)] = without_nul(r.prompt)
    return prompts.upsert(run_id, [cleaned[id(r.prompt)] for r in rollouts])


def rollout_row(run_id: int, rollout: Rollout, run_prompt: RunPrompt) -> RolloutRow:
    """The Rollout row of one reported rollout, with the columns the inspector filters on."""
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
        run_id=run_id, step=rollout.step, prompt_id=str(rollout.prompt_id), sample_index=rollout.sample_index,
        run_prompt=run_prompt, completion=completion, preview=text[:PREVIEW_CHARS],
        reward=float(rollout.reward), advantage=float(rollout.advantage), num_tokens=int(rollout.num_tokens),
        finish_reason=rollout.finish_reason, scores=scores, trained=rollout.trained,
        logprobs=token_data.stored(rollout.logprobs, getattr(rollout, "teacher_tokens", None)),
        turns=turns, end_reason=rollout.end_reason or "", **episodes.columns(turns, rollout.end_reason),
        hinted=rollout.hint is not None, hint=without_nul(rollout.hint or ""), hint_fraction=rollout.hint_fraction,
        split=rollout.split, policy_versions=version_spans(rollout.policy_versions),
        staleness=None if rollout.staleness is None else int(rollout.staleness),
    )  # fmt: skip
