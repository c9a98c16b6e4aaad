"""What `model` names in /v1/ and the playground: a run's checkpoint ("run-12/step-40") or the base
model it trained from ("run-12/base"), readable by the members of the run's team (and a token of it).

One name per model the studio can serve, so the web process can say who may use it from the name alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from studio.runs.models import Checkpoint, Run

REF = re.compile(r"^run-(?P<run>[1-9][0-9]{0,17})/(?:step-(?P<step>[0-9]{1,12})|(?P<base>base))$")
MAX_LISTED = 500  # /v1/models lists a team's newest runs' models, at most this many


@dataclass(frozen=True)
class ModelRef:
    """A servable model: its name, its run and team, where its weights are."""

    name: str
    run_id: int
    team_id: int
    model_path: str
    checkpoint: str = ""
    step: int | None = None
    model_spec: dict[str, Any] = field(default_factory=dict)
    created: int = 0  # unix seconds, as /v1/models says


def ref_name(run_id: int, step: int | None) -> str:
    return f"run-{run_id}/base" if step is None else f"run-{run_id}/step-{step}"


def _model_section(run: Run) -> dict[str, Any] | None:
    section = run.spec.get("model") if isinstance(run.spec, dict) else None
    if not isinstance(section, dict) or not isinstance(section.get("path"), str) or not section["path"]:
        return None
    return section


def resolve(name: object, team_ids: set[int]) -> ModelRef | None:
    """The model `name` names if one of `team_ids` may read it; None for a malformed name, a model
    that does not exist, or one of another team (the same answer, so a name leaks nothing)."""
    match = REF.match(name) if isinstance(name, str) else None
    if match is None:
        return None
    run = Run.objects.filter(pk=int(match["run"]), team_id__in=team_ids).first()
    section = _model_section(run) if run is not None else None
    if section is None:
        return None
    step = None if match["base"] else int(match["step"])
    checkpoint = ""
    created = run.created
    if step is not None:
        row = Checkpoint.objects.filter(run=run, step=step).order_by("-pk").first()
        if row is None:
            return None
        checkpoint, created = row.path, row.created
    return ModelRef(name=ref_name(run.pk, step), run_id=run.pk, team_id=run.team_id, model_path=section["path"],
                    checkpoint=checkpoint, step=step, model_spec=section, created=int(created.timestamp()))  # fmt: skip


def listed(team_ids: set[int]) -> list[ModelRef]:
    """Every model the teams may use: each run's base, then its checkpoints, newest runs first."""
    runs = Run.objects.filter(team_id__in=team_ids).order_by("-pk")[:MAX_LISTED]
    out: list[ModelRef] = []
    checkpoints: dict[int, dict[int, Checkpoint]] = {}  # a step saved again: its newest row
    for row in Checkpoint.objects.filter(run__in=[r.pk for r in runs]).order_by("run_id", "step", "pk"):
        checkpoints.setdefault(row.run_id, {})[row.step] = row
    for run in runs:
        section = _model_section(run)
        if section is None:
            continue
        common = {"run_id": run.pk, "team_id": run.team_id, "model_path": section["path"], "model_spec": section}
        out.append(ModelRef(name=ref_name(run.pk, None), created=int(run.created.timestamp()), **common))
        for row in checkpoints.get(run.pk, {}).values():
            out.append(ModelRef(name=ref_name(run.pk, row.step), checkpoint=row.path, step=row.step,
                                created=int(row.created.timestamp()), **common))  # fmt: skip
        if len(out) >= MAX_LISTED:
            break
    return out[:MAX_LISTED]
