"""What a user does with suites, one function each, that the API and the pages both call: launch a suite
on a set of models, stop a suite run.

A launch makes the suite run, one evaluation Run per (model, task) pair (queued, with the pair's
RunSpec) and its SuiteResult row, then sends one job for the whole suite run (workers.run_suite, on the
queue evaluation runs take): the worker runs the pairs model by model."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from studio.celery import app as celery_app
from studio.evaluations import suite_tasks
from studio.evaluations.models import Suite, SuiteResult, SuiteRun
from studio.experiments import paths
from studio.experiments.specs import SpecError
from studio.fleet.queues import task_queue
from studio.lib.errors import FieldErrors
from studio.runs import events, lifecycle, placement
from studio.runs.models import FAILED, QUEUED, Checkpoint, Run
from trainers.spec import validation_errors
from trainers.spec.suite import SuiteSpec

SUITE_TASK = "workers.run_suite"
MAX_MODELS = 64
WAITING = "waiting for its suite's job"


class LaunchRefused(FieldErrors, ValueError):
    """Why the suite cannot launch on these models, as {field: why} (the API answers 400)."""


def model_entries(team, checkpoint_ids: list[int], base_models: list[str]) -> list[dict[str, Any]]:
    """SuiteModelSpec configs: each base model path, then each checkpoint of the team's runs (on its run's
    model settings: its LoRA, dtype), in the order given. LaunchRefused naming a path or id that is refused."""
    if not checkpoint_ids and not base_models:
        raise LaunchRefused({"checkpoints": "choose at least one checkpoint or base model"})
    if len(checkpoint_ids) + len(base_models) > MAX_MODELS:
        raise LaunchRefused({"checkpoints": f"at most {MAX_MODELS} models in one suite run"})
    entries, labels = [], set()
    for i, path in enumerate(base_models):
        if error := paths.model_path_error(path, team):
            raise LaunchRefused({f"base_models.{i}": error})
        entries.append({"label": _unique(f"base: {path}", labels), "model": {"path": path}})
    found = Checkpoint.objects.filter(pk__in=checkpoint_ids, run__team=team).select_related("run").in_bulk()
    for i, pk in enumerate(checkpoint_ids):
        checkpoint = found.get(pk)
        if checkpoint is None:
            raise LaunchRefused({f"checkpoints.{i}": f"checkpoint {pk} does not exist in this team"})
        model = dict(checkpoint.run.spec.get("model") or {})
        entries.append({"label": _unique(f"{checkpoint.run.name} @ step {checkpoint.step}", labels), "model": model,
                        "checkpoint": checkpoint.path, "step": checkpoint.step, "_run": checkpoint.run_id})  # fmt: skip
    return entries


def _unique(label: str, taken: set[str]) -> str:
    label, n = label[:110], 2
    candidate = label
    while candidate in taken:
        candidate, n = f"{label} ({n})", n + 1
    taken.add(candidate)
    return candidate


def launch(suite: Suite, user, *, checkpoint_ids: list[int] = (), base_models: list[str] = (), name: str = "",
           source_run: Run | None = None, source_step: int | None = None) -> SuiteRun:  # fmt: skip
    """A queued suite run of `suite` on the checkpoints and base models; LaunchRefused (or TasksRefused)
    naming each field refused. The caller checked that the user may edit the suite's team."""
    team = suite.team
    tasks = suite_tasks.resolve(suite.tasks, team)
    entries = model_entries(team, list(checkpoint_ids), list(base_models))
    runs_of = {e["label"]: e.pop("_run", None) for e in entries}
    name = name or f"{suite.name} #{suite.suite_runs.count() + 1}"
    config = {"name": name, "tasks": tasks, "models": entries, "rollout": suite.rollout or {}, "seed": suite.seed}
    try:
        spec = SuiteSpec.model_validate(config)
    except ValidationError as exc:
        raise LaunchRefused(validation_errors(exc)) from None
    cells = {(i, j): spec.cell_config(m, t) for i, m in enumerate(spec.models) for j, t in enumerate(spec.tasks)}
    for (i, j), cell in cells.items():
        try:
            cells[(i, j)] = paths.validate_for_team(cell, team)
        except SpecError as exc:
            raise LaunchRefused({_cell_field(i, j, k): v for k, v in exc.errors.items()}) from None
    if refused := placement.refusal(next(iter(cells.values())), "eval"):
        raise LaunchRefused({"rollout": refused})
    with transaction.atomic():
        suite_run = SuiteRun.objects.create(suite=suite, team=team, name=name, spec=spec.model_dump(mode="json"),
                                            created_by=_user(user), source_run=source_run,
                                            source_step=source_step)  # fmt: skip
        for (i, j), cell in cells.items():
            model, task = spec.models[i], spec.tasks[j]
            run = Run.objects.create(team=team, kind="eval", name=cell["name"][:200], spec=cell, created_by=_user(user),
                                     total_steps=1, waiting_for=WAITING, experiment=None)  # fmt: skip
            events.record(run.pk, [events.status_item(QUEUED, WAITING)])
            SuiteResult.objects.create(suite_run=suite_run, run=run, model_index=i, model_label=model.label,
                                       checkpoint=model.checkpoint or "", step=model.step,
                                       source_run_id=runs_of.get(model.label), task_index=j, task=task.name,
                                       k=task.samples_per_prompt)  # fmt: skip
        transaction.on_commit(lambda: enqueue(suite_run))
    return suite_run


def _cell_field(i: int, j: int, field: str) -> str:
    """A pair's refused setting named where the user set it: the model's (model.path, eval.checkpoint) under
    models.<i>, the task's under tasks.<j>."""
    if field.startswith(("model.", "eval.checkpoint")):
        return f"models.{i}.{field.replace('eval.checkpoint', 'checkpoint')}"
    return f"tasks.{j}.{field}"


def _user(user):
    return user if user is not None and user.is_authenticated else None


def enqueue(suite_run: SuiteRun) -> None:
    """Send the suite run's job on the queue evaluation runs take; a broker that cannot be reached fails its
    pairs with the reason (their rows exist; pairs left queued with no message would wait forever)."""
    try:
        result = celery_app.send_task(SUITE_TASK, args=[suite_run.pk], queue=task_queue(SUITE_TASK))
    except Exception as exc:  # noqa: BLE001 - kombu's connection errors vary by transport
        error = f"could not reach the task broker to queue this suite run: {type(exc).__name__}: {exc}"
        for run_id in suite_run.results.values_list("run_id", flat=True):
            with transaction.atomic():
                if Run.objects.filter(pk=run_id, state=QUEUED).update(state=FAILED, finished=timezone.now(),
                                                                      error=error):  # fmt: skip
                    events.record(run_id, [events.status_item(FAILED, error)])
        return
    SuiteRun.objects.filter(pk=suite_run.pk).update(celery_task_id=result.id)


def cancel(suite_run: SuiteRun) -> SuiteRun:
    """Stop every pair not yet ended: queued ones at once, the running ones at their next check."""
    for result in SuiteResult.objects.filter(suite_run=suite_run).select_related("run"):
        if result.run.state in lifecycle.ACTIVE:
            lifecycle.request_cancel(result.run)
    return SuiteRun.objects.prefetch_related("results__run").get(pk=suite_run.pk)  # the pairs' states as they are now
