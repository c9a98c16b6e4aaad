"""Whether a run's scoring worked: its criterion errors, tallied once when it ends.

A criterion that raises (or times out, or is not run) scores 0 on that rollout. The trainer warns at
the first step of a streak of such failures (trainers.run.failure_watch.FailureWatch) and, when the experiment
says so, stops the run; by default it goes on, and a run whose only criterion failed on every rollout
would end "succeeded" with a reward of 0 and a warning about its first step. So when a run ends,
`lifecycle.finish` counts, per criterion, the rollouts whose score carries an error (`tally`), keeps
the counts on the run (`Run.scoring`), and where a criterion failed on (nearly) every rollout
(`Run.scoring_failed`, the one rule) the run's warning says so for the whole run (`describe`) and the
pages show a "scoring failed" badge with the count.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from studio.runs.models import Rollout


def criteria(spec: dict[str, Any]) -> list[str]:
    """The names of the run's criteria, from its stored settings."""
    rubric = (spec or {}).get("rubric") or {}
    return [c["name"] for c in rubric.get("criteria") or [] if isinstance(c, dict) and isinstance(c.get("name"), str)]


def _error(name: str) -> KeyTransform:
    # Built from transforms, not a "scores__name__error" lookup: a criterion name may hold "__".
    return KeyTransform("error", KeyTransform(name, "scores"))


def _failed(alias: str) -> Q:
    """The aliased error of a criterion is there and not JSON null (`isnull` on a key tests whether the key is
    there; `=None` whether it holds null: SQLite's text of a JSON null is "null", not NULL)."""
    return Q(**{f"{alias}__isnull": False}) & ~Q(**{alias: None})


def tally(run_id: int, names: list[str]) -> dict[str, Any]:
    """{rollouts: every rollout of the run (training and validation), failed: {criterion: rollouts whose
    score of it carries an error}} (criteria that never failed left out). One aggregate pass over the
    run's rollouts, done once when it ends."""
    rollouts = Rollout.objects.filter(run_id=run_id)
    errors = {f"e{i}": _error(name) for i, name in enumerate(names)}
    counts = rollouts.alias(**errors).aggregate(
        rollouts=Count("id"), **{f"f{i}": Count("id", filter=_failed(f"e{i}")) for i in range(len(names))}
    )
    failed = {name: counts[f"f{i}"] for i, name in enumerate(names) if counts[f"f{i}"]}
    return {"rollouts": counts["rollouts"], "failed": failed}


def last_error(run_id: int, name: str) -> str:
    """The newest error text of a criterion on the run ("" if none): one walk of its (run, step, id) index."""
    rows = Rollout.objects.filter(run_id=run_id).alias(e=_error(name)).filter(_failed("e"))
    text = KeyTextTransform("error", KeyTransform(name, "scores"))
    return rows.order_by("-step", "-id").annotate(text=text).values_list("text", flat=True).first() or ""


def describe(run_id: int, failures: list[dict[str, Any]]) -> str:
    """The run's warning once it ended with its scoring failed (Run.scoring_failed): each criterion with
    its count, and its last error."""
    parts = []
    for f in failures:
        error = last_error(run_id, f["criterion"])
        share = f["failed"] / f["rollouts"]
        parts.append(
            f"criterion {f['criterion']!r} failed on {f['failed']:,} of the run's {f['rollouts']:,} rollouts ({share:.0%})"
            + (f"; last error: {error}" if error else "")
        )
    return "scoring failed: " + "; ".join(parts) + ". A failed criterion scores 0, so this run's reward says little."
