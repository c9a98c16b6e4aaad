"""Write a run's per-prompt statistics: the trainer's `prompt_stats` report, upserted per step.

The trainer reports, for the prompts a step drew, each one's running totals (draws, Beta posterior,
pass rate and its uncertainty, status) and that step's outcome (`step_passed` of `step_samples`).
One PromptStat row per (run, prompt_id) holds the totals, replaced, and a history the step's
outcome is appended to. A resumed run is a new Run: it starts with its source's rows as they stood
at the checkpoint it resumes from (`inherit`), so the prompts view keeps what came before. A run
restarted by itself stays the same Run, cut back to the checkpoint it resumes from (`rewind`).
"""

from __future__ import annotations

from typing import Any

from studio.runs.events import EventItem
from studio.runs.models import PROMPT_STATUSES, PromptStat

# A prompt drawn every step of a long run would grow its history without end, and the row is
# rewritten each time it is drawn: the newest entries are kept (the rollouts keep the rest).
HISTORY_MAX = 1000
TOTALS = ("draws", "alpha", "beta", "pass_rate", "pass_rate_std", "last_step", "status")
STATUS_NAMES = tuple(name for name, _ in PROMPT_STATUSES)


class PromptStatError(ValueError):
    """A reported statistic the studio cannot store; the message names the prompt and the field."""


def _clean(stat: dict[str, Any], step: int) -> dict[str, Any]:
    """The reported dict as typed column values, or PromptStatError naming what is wrong.
    A prompt never drawn has no last step (None): the reporting step stands in."""
    pid = stat.get("prompt_id")
    try:
        clean = {
            "prompt_id": str(pid),
            "draws": int(stat["draws"]),
            "alpha": float(stat["alpha"]),
            "beta": float(stat["beta"]),
            "pass_rate": float(stat["pass_rate"]),
            "pass_rate_std": float(stat["pass_rate_std"]),
            "last_step": step if stat["last_step"] is None else int(stat["last_step"]),
            "status": str(stat["status"]),
            "passed": int(stat["step_passed"]),
            "samples": int(stat["step_samples"]),
        }
    except KeyError as exc:
        raise PromptStatError(f"prompt {pid!r}: the statistic has no {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise PromptStatError(f"prompt {pid!r}: {exc}") from None
    if clean["status"] not in STATUS_NAMES:
        raise PromptStatError(
            f"prompt {pid!r}: status must be one of {', '.join(STATUS_NAMES)}, got {clean['status']!r}"
        )
    return clean


def appended(history: list[list[int]], step: int, passed: int, samples: int) -> list[list[int]]:
    """`history` with this step's outcome last. An entry for this step or a later one (the same step
    reported again, or steps a resumed run replays) is replaced, so each step appears once."""
    kept = [entry for entry in history if entry[0] < step]
    return [*kept, [step, passed, samples]][-HISTORY_MAX:]


def record(run_id: int, step: int, stats: list[dict[str, Any]]) -> int:
    """Upsert the step's statistics; returns how many prompts it wrote. Two queries plus one per
    write kind (create, update), however many prompts: run it inside the flush's transaction."""
    # A row drawn twice in the step ("id@2") is one statistic whose step outcome already adds up
    # both groups (PromptStats.event); were it sent twice, the later one holds the step so far.
    by_id = {clean["prompt_id"]: clean for clean in (_clean(stat, step) for stat in stats)}
    if not by_id:
        return 0
    rows = {row.prompt_id: row for row in PromptStat.objects.filter(run_id=run_id, prompt_id__in=list(by_id))}
    new, changed = [], []
    for pid, stat in by_id.items():
        row = rows.get(pid) or PromptStat(run_id=run_id, prompt_id=pid)
        for field in TOTALS:
            setattr(row, field, stat[field])
        row.history = appended(row.history or [], step, stat["passed"], stat["samples"])
        (changed if row.pk else new).append(row)
    PromptStat.objects.bulk_create(new)
    PromptStat.objects.bulk_update(changed, [*TOTALS, "history"])
    return len(by_id)


def event(step: int, written: int) -> EventItem:
    """The run stream's note that `written` prompts' statistics of `step` were written. Only the
    count, not the statistics: an open prompts view re-reads the page it shows (sorted, filtered)."""
    return ("prompt_stats", step, {"prompts": written})


def inherit(run_id: int, source_id: int, up_to_step: int) -> int:
    """Copy the source run's rows into `run_id` as they stood at `up_to_step` (its checkpoint).

    History after the checkpoint is cut, and prompts first drawn after it are left out: the resumed
    trainer restores its statistics from that checkpoint and draws those steps again. The totals of
    a prompt drawn after the checkpoint are the source's latest (the studio keeps no totals per
    step) until the resumed run draws it and reports its own. Returns the rows copied.
    """
    copies = []
    for row in PromptStat.objects.filter(run_id=source_id).order_by("pk").iterator():
        history = [entry for entry in row.history if entry[0] <= up_to_step]
        if not history:
            continue
        copy = PromptStat(run_id=run_id, prompt_id=row.prompt_id, history=history,
                          **{field: getattr(row, field) for field in TOTALS})  # fmt: skip
        copy.last_step = min(row.last_step, history[-1][0])
        copies.append(copy)
    PromptStat.objects.bulk_create(copies, batch_size=500)
    return len(copies)


def rewind(run_id: int, step: int) -> int:
    """Cut the run's rows back to `step` (a restart resumes from its checkpoint there), as `inherit`
    cuts a copy: history after it removed, prompts first drawn after it deleted. Returns rows changed."""
    changed, gone = [], []
    for row in PromptStat.objects.filter(run_id=run_id, last_step__gt=step).order_by("pk").iterator():
        history = [entry for entry in row.history if entry[0] <= step]
        if not history:
            gone.append(row.pk)
            continue
        row.history, row.last_step = history, min(row.last_step, history[-1][0])
        changed.append(row)
    PromptStat.objects.filter(pk__in=gone).delete()
    PromptStat.objects.bulk_update(changed, ["history", "last_step"], batch_size=500)
    return len(changed) + len(gone)
