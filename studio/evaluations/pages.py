"""The suites pages: the list, the suite editor, the launch form (checkpoints of the team's runs and base
models), and a suite run's result table. They validate through the API's serializers and call the same
services, so a rule lives in one place."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from studio.accounts import permissions as perms
from studio.datasets.models import Dataset
from studio.environments.models import Environment
from studio.evaluations import forms, services, suite_tasks, table
from studio.evaluations.api import SuiteSerializer
from studio.evaluations.models import Suite, SuiteRun
from studio.experiments import paths
from studio.lib.errors import FieldErrors
from studio.lib.page_forms import flat_errors, serializer_context
from studio.rubrics.models import Rubric
from studio.runs.models import Checkpoint
from trainers.data.procedural.catalog import TASKS

NEW_TASK = {"name": "", "samples_per_prompt": 4}


@login_required
def suites(request: HttpRequest) -> HttpResponse:
    rows = perms.visible(Suite.objects.all(), request.user).distinct().select_related("team")
    runs = perms.visible(SuiteRun.objects.all(), request.user).distinct().prefetch_related("results__run")[:50]
    return render(request, "evaluations/list.html", {"suites": rows, "suite_runs": runs})


@login_required
def suite_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    suite = perms.get_for(request.user, Suite.objects.all(), pk) if pk else None
    can_edit = suite is None or perms.has_role(request.user, suite.team_id, perms.EDIT)
    values = {"team": suite.team_id if suite else None, "name": suite.name if suite else "",
              "description": suite.description if suite else "", "seed": suite.seed if suite else 0,
              "tasks": list(suite.tasks) if suite else [], "rollout": dict(suite.rollout) if suite else {}}  # fmt: skip
    errors: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        if not can_edit:
            perms.check(request.user, suite, perms.EDIT)  # 403 for a viewer
        values, errors = forms.read_suite(request.POST)
        serializer = SuiteSerializer(suite, data=values, context=serializer_context(request))
        if not errors and serializer.is_valid():
            if suite is None:
                perms.require(request.user, serializer.validated_data["team"], perms.EDIT)
            saved = serializer.save(**({"created_by": request.user} if suite is None else {}))
            return redirect("suite", pk=saved.pk)
        errors = errors or flat_errors(serializer.errors)
        status = 400
    team_id = values.get("team") if isinstance(values.get("team"), int) else None
    context = {
        "suite": suite, "values": values, "errors": errors, "can_edit": can_edit,
        "task_rows": [*values["tasks"], dict(NEW_TASK)],
        "teams": perms.editable_teams(request.user), **_choices(request.user, team_id),
        "procedural_tasks": TASKS.names(), "suite_runs": suite.suite_runs.all()[:20] if suite else [],
    }  # fmt: skip
    return render(request, "evaluations/edit.html", context, status=status)


def _choices(user, team_id: int | None) -> dict:
    """The datasets, rubrics and environments a task may name: the suite's team's (every team's of the user
    for a new suite; the API refuses another team's)."""
    out = {}
    for name, model in (("datasets", Dataset), ("rubrics", Rubric), ("environments", Environment)):
        rows = perms.visible(model.objects.all(), user).distinct().order_by("name")
        out[name] = rows.filter(team_id=team_id) if team_id else rows
    return out


@login_required
def suite_launch(request: HttpRequest, pk: int) -> HttpResponse:
    suite = perms.get_for(request.user, Suite.objects.all(), pk, perms.EDIT)
    errors: dict[str, str] = {}
    values = {"checkpoints": [], "base_models": [], "name": ""}
    if request.method == "POST":
        values = forms.read_launch(request.POST)
        try:
            suite_run = services.launch(suite, request.user, checkpoint_ids=values["checkpoints"],
                                        base_models=values["base_models"], name=values["name"])  # fmt: skip
            return redirect("suite-run", pk=suite_run.pk)
        except (FieldErrors, suite_tasks.TasksRefused) as exc:
            errors = {k: str(v) for k, v in exc.errors.items()}
    rows = (Checkpoint.objects.filter(run__team=suite.team).select_related("run")
            .order_by("-run__created", "-run_id", "step"))[:500]  # fmt: skip
    # A run keeps only its newest checkpoint.keep_last folders: the rows of deleted ones are not offered
    # (launching on one would be refused: "folder ... does not exist").
    checkpoints = [c for c in rows if paths.missing_folder_error(c.path, adapters_ok=True) is None]
    models = sorted({(c.run.spec.get("model") or {}).get("path", "") for c in checkpoints} - {""})
    context = {"suite": suite, "errors": errors, "values": values, "checkpoints": checkpoints,
               "suggested_base_models": models, "gone": len(rows) - len(checkpoints)}  # fmt: skip
    return render(request, "evaluations/launch.html", context, status=400 if errors else 200)


@login_required
def suite_run_page(request: HttpRequest, pk: int) -> HttpResponse:
    suite_run = perms.get_for(request.user, SuiteRun.objects.select_related("suite", "source_run"), pk)
    result = table.result_table(suite_run)
    return render(request, "evaluations/run.html", {"suite_run": suite_run, "table": result,
                                                    "metrics": table.METRICS})  # fmt: skip
