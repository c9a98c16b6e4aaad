"""Runs trained elsewhere: made with a token, written batch by batch, imported from verl's dumps.

Every write goes through `ingest`: one transaction per batch that stores its rows with the studio's
own writer (studio.runs.reports.write, as the worker's reporter does), appends their events to the
run's stream (studio.runs.events.record: published after commit, so the run page follows it live),
and notes the batch id; state changes go through studio.runs.lifecycle (start, finish). So an
ingested run has the rows, events and states of any run, and its page, inspector, notes, share links
and comparison read it alike.

Idempotency: a batch id is stored once (IngestBatch, unique per run); a batch sent again gets the
first answer back with `duplicate: true` and writes nothing, even after the run ended. Without a batch
id, or with a new one, metric points already stored for the same (step, key) and rollouts for the same
(split, step, prompt_id, sample_index) are skipped, so a trainer that reports a step again after a
restart does not double it. Log lines and status changes are deduplicated by the batch id only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone
from rest_framework import serializers

from rollout_client import verl
from studio.ingest.items import EXTERNAL_SOURCES, BatchIn, body_digest, to_rollouts
from studio.ingest.models import IngestBatch, RunToken
from studio.lib.errors import Conflict
from studio.runs import events, lifecycle, reports
from studio.runs.models import FINISHED_STATES, QUEUED, RUNNING, MetricPoint, Rollout, Run


class IngestRefused(Conflict):
    """A batch the run cannot take: `status` is the HTTP status (409), the message says why."""


def external_spec(source: str, settings: dict[str, Any] | None = None, criteria: list[str] | None = None) -> dict:
    """An ingested run's stored settings: the trainer's own (compared like any run's) and its criteria's names,
    where the run page and the inspector read a run's criteria (spec.rubric.criteria)."""
    return {
        "source": source,
        "settings": settings or {},
        "rubric": {"criteria": [{"name": name, "kind": "external"} for name in dict.fromkeys(criteria or [])]},
    }


def create_run(team, user, *, name: str, source: str = "api", experiment=None, settings: dict[str, Any] | None = None,
               criteria: list[str] | None = None, total_steps: int = 0) -> tuple[Run, str]:  # fmt: skip
    """A run that its trainer will write (queued until its first report), and its first token (shown once).
    The caller checks that `user` may edit in `team`."""
    if source not in EXTERNAL_SOURCES:
        raise ValueError(f"source must be one of {', '.join(EXTERNAL_SOURCES)}")
    with transaction.atomic():
        run = Run.objects.create(
            team=team, experiment=experiment, kind="train", name=name, source=source,
            spec=external_spec(source, settings, criteria), total_steps=total_steps,
            created_by=user if user is not None and user.is_authenticated else None,
            waiting_for="waiting for its trainer's first report",
        )  # fmt: skip
        events.record(run.pk, [events.status_item(QUEUED, f"waiting for its trainer ({source}) to report")])
        _, token = RunToken.issue(run, user)
    return run, token


def run_answer(run: Run) -> dict[str, Any]:
    return {"id": run.pk, "state": run.state, "last_step": run.last_step, "cancel_requested": run.cancel_requested}


def ingest(run_id: int, batch_id: str | None, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Store one checked batch (items as BatchIn validated them) in the run; the answer to send back.
    IngestRefused (409) when the run has ended or the batch id was used for another batch."""
    digest = body_digest(items)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)  # one writer of a run at a time
        if batch_id:
            done = IngestBatch.objects.filter(run_id=run_id, batch_id=batch_id).first()
            if done is not None:
                if done.digest != digest:
                    raise IngestRefused(f"batch id {batch_id!r} was used for another batch")
                return {"batch_id": batch_id, "duplicate": True, "stored": done.stored, "run": run_answer(run)}
        if run.state in FINISHED_STATES:
            raise IngestRefused(f"run is {run.state}: it takes no more reports")
        stored = Writer(run).write(items)
        if batch_id:
            IngestBatch.objects.create(run_id=run_id, batch_id=batch_id, digest=digest, stored=stored)
        run.refresh_from_db()
    return {"batch_id": batch_id, "duplicate": False, "stored": stored, "run": run_answer(run)}


class Writer:
    """Writes one batch's items in order, keeping the run's event stream in that order too."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.events: list[events.EventItem] = []
        self.last_step = run.last_step
        self.stored = {"metrics": 0, "rollouts": 0, "logs": 0, "skipped_metrics": 0, "skipped_rollouts": 0}

    def write(self, items: list[dict[str, Any]]) -> dict[str, int]:
        for item in items:
            kind = item["kind"]
            if kind == "status":
                self.status(item["state"], item.get("detail", ""))
                continue
            self.start()  # a report of any kind says the trainer runs
            if kind == "metrics":
                self.metrics(item["step"], item["values"], item.get("wall_time"))
            elif kind in ("rollouts", "episodes"):
                self.rollouts(item["step"], to_rollouts(item["step"], item[kind]))
            elif kind == "log":
                for line in item["lines"]:
                    self.events.append(reports.write(self.run.pk, "log", None, {"line": reports.without_nul(line)}))
                self.stored["logs"] += len(item["lines"])
            elif kind == "settings":
                self.settings(item)
        self.record()
        return self.stored

    def record(self) -> None:
        """Append the events written so far (before a state change records its own, so the order holds)."""
        events.record(self.run.pk, self.events, last_step=self.last_step, heartbeat=timezone.now())
        self.events = []

    def start(self) -> None:
        if self.run.state == QUEUED:
            self.record()
            worker = f"{self.run.get_source_display()} trainer (ingest API)"
            lifecycle.start(self.run.pk, worker, where="outside the studio")
            self.run.state = RUNNING

    def status(self, state: str, detail: str) -> None:
        if state == RUNNING:
            self.start()
            if detail:
                self.events.append(reports.write(self.run.pk, "log", None, {"line": reports.without_nul(detail)}))
            return
        self.start()  # queued -> running -> the end: the run's stream says both
        self.record()
        lifecycle.finish(self.run.pk, state, detail=detail, error=detail if state == "failed" else "")
        self.run.state = state

    def metrics(self, step: int, values: dict[str, float], wall_time: float | None) -> None:
        have = set(
            MetricPoint.objects.filter(run_id=self.run.pk, step=step, key__in=list(values)).values_list(
                "key", flat=True
            )
        )
        fresh = {k: v for k, v in values.items() if k not in have}
        self.stored["skipped_metrics"] += len(values) - len(fresh)
        if fresh:
            self.events.append(reports.write(self.run.pk, "metrics", step, fresh, wall_time=wall_time))
            self.stored["metrics"] += len(fresh)
            self.last_step = max(self.last_step, step)

    def rollouts(self, step: int, rollouts: list) -> None:
        have = set(
            Rollout.objects.filter(run_id=self.run.pk, step=step).values_list("split", "prompt_id", "sample_index")
        )
        fresh = []
        for r in rollouts:
            key = (r.split, r.prompt_id, r.sample_index)
            if key not in have:
                have.add(key)
                fresh.append(r)
        self.stored["skipped_rollouts"] += len(rollouts) - len(fresh)
        if fresh:
            self.events.append(reports.write(self.run.pk, "rollouts", step, fresh))
            self.stored["rollouts"] += len(fresh)
            self.last_step = max(self.last_step, step)

    def settings(self, item: dict[str, Any]) -> None:
        spec = external_spec(self.run.source, item["settings"], item.get("criteria"))
        fields: dict[str, Any] = {"spec": spec}
        if "total_steps" in item:
            fields["total_steps"] = item["total_steps"]
        Run.objects.filter(pk=self.run.pk).update(**fields)


def checked(batch_id: str | None, items: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """A batch checked as the API checks it (serializers.ValidationError naming each bad field)."""
    body = BatchIn(data={"items": items, **({"batch_id": batch_id} if batch_id else {})})
    body.is_valid(raise_exception=True)
    return body.validated_data.get("batch_id"), body.validated_data["items"]


def import_verl(
    run: Run, *, rollouts: list[Path] = (), validation: list[Path] = (), metrics: Path | None = None
) -> dict:
    """verl's dumps (rollout_client.verl) stored in `run`, then the run ended as succeeded. Batch ids name the
    files, so importing the same files again stores nothing twice. verl.DumpError for a file that is not a dump."""
    batches = verl.import_items(rollouts=rollouts, validation=validation, metrics=metrics)
    if not batches:
        raise verl.DumpError("no verl dump files (<step>.jsonl) among those given")
    totals = {"batches": 0, "duplicates": 0, "metrics": 0, "rollouts": 0, "skipped_rollouts": 0}
    for batch_id, items in [("verl-start", [{"kind": "status", "state": "running", "detail": "imported from verl dumps"}]),
                            *batches,
                            ("verl-end", [{"kind": "status", "state": "succeeded", "detail": f"{len(batches)} files imported"}])]:  # fmt: skip
        try:
            answer = ingest(run.pk, *checked(batch_id, items))
        except serializers.ValidationError as exc:
            raise verl.DumpError(f"{batch_id}: {exc.detail}") from None
        totals["batches"] += 1
        if answer["duplicate"]:  # imported before (its first answer came back): nothing new
            totals["duplicates"] += 1
            continue
        for key in ("metrics", "rollouts", "skipped_rollouts"):
            totals[key] += answer["stored"].get(key, 0)
    run.refresh_from_db()
    return totals
