"""Plain server-rendered pages: team, datasets, rubrics, experiments, run list.

Pages validate through the same serializers as the API, so a rule lives in one place.
The run page itself (`/runs/<id>/`) belongs to studio.sharing.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import NotFound
from rest_framework.exceptions import PermissionDenied as DRFPermissionDenied

from studio.accounts import permissions as perms
from studio.accounts.models import LAST_OWNER, OWNER, ROLES, VIEWER, Team
from studio.api.datasets import MAPPING_FIELDS, DatasetSerializer
from studio.api.experiments import ExperimentSerializer
from studio.api.rubrics import RubricSerializer
from studio.datasets.files import DatasetFileError, iter_rows
from studio.datasets.models import Dataset
from studio.experiments.models import Experiment
from studio.experiments.paths import validate_for_team
from studio.experiments.specs import SpecError
from studio.front import forms
from studio.rubrics.models import Rubric
from studio.rubrics.scoring import TryError, spec_to_try, try_rubric
from studio.runs import lifecycle
from studio.runs.models import Run
from trainers.spec import PRESET_DESCRIPTIONS, preset_values


class _Request:
    """What the API serializers read from `context["request"]`."""

    def __init__(self, request: HttpRequest) -> None:
        self.user = request.user


def _ctx(request) -> dict[str, Any]:
    return {"request": _Request(request)}


def _flat_errors(detail: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(detail, dict):
        out: dict[str, str] = {}
        for key, value in detail.items():
            out.update(
                _flat_errors(value, f"{prefix}{key}." if not isinstance(value, (str, list)) else f"{prefix}{key}")
            )
        return out
    if isinstance(detail, list):
        return {prefix.rstrip("."): " ".join(str(v) for v in detail)}
    return {prefix.rstrip("."): str(detail)}


@login_required
def home(request: HttpRequest) -> HttpResponse:
    lifecycle.sweep_lost_runs()
    runs = perms.visible(Run.objects.all(), request.user).distinct().select_related("experiment")[:20]
    experiments = perms.visible(Experiment.objects.all(), request.user).distinct()[:10]
    return render(request, "front/home.html", {"runs": runs, "experiments": experiments})


@login_required
def teams(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        if "create_team" in request.POST:
            name = request.POST.get("name", "").strip()
            if name and not Team.objects.filter(name=name).exists():
                Team.objects.create(name=name).add_member(request.user, OWNER)
            else:
                messages.error(request, "A team needs a new, unique name.")
        elif "add_member" in request.POST:
            team = perms.get_for(request.user, Team.objects.all(), request.POST.get("team"), perms.MANAGE)
            from django.contrib.auth import get_user_model

            user = get_user_model().objects.filter(username=request.POST.get("username", "")).first()
            role = request.POST.get("role", VIEWER)
            if user is None:
                messages.error(request, "No such user.")
            elif role not in dict(ROLES):
                messages.error(request, f"Unknown role {role!r}; choose one of {', '.join(dict(ROLES))}.")
            elif role != OWNER and team.is_last_owner(user):
                messages.error(request, LAST_OWNER.capitalize() + ".")
            else:
                team.add_member(user, role)
        elif "token" in request.POST:
            Token.objects.get_or_create(user=request.user)
        return redirect("teams")
    my_teams = perms.visible_teams(request.user).prefetch_related("memberships__user").distinct()
    rows = [(team, team.role_of(request.user)) for team in my_teams]
    token = Token.objects.filter(user=request.user).first()
    return render(request, "front/teams.html", {"teams": rows, "roles": ROLES, "token": token})


# --- datasets ---------------------------------------------------------------------------
@login_required
def datasets(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    if request.method == "POST":
        data = {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken" and v != ""}
        data["extra_fields"] = [f.strip() for f in request.POST.get("extra_fields", "").split(",") if f.strip()]
        if "file" in request.FILES:
            data["file"] = request.FILES["file"]
        serializer = DatasetSerializer(data=data, context=_ctx(request))
        try:
            valid = serializer.is_valid()  # checks the role before an upload is written
        except DRFPermissionDenied as exc:
            raise PermissionDenied(str(exc.detail)) from None
        except NotFound:
            raise Http404("team not found") from None
        if valid:
            dataset = serializer.save(created_by=request.user)
            return redirect("dataset", dataset.pk)
        errors = _flat_errors(serializer.errors)
    rows = perms.visible(Dataset.objects.all(), request.user).distinct().select_related("team")
    teams = perms.editable_teams(request.user).distinct()
    return render(request, "front/datasets.html", {"datasets": rows, "teams": teams, "errors": errors,
                                                   "post": request.POST})  # fmt: skip


@login_required
def dataset_detail(request: HttpRequest, pk: int) -> HttpResponse:
    dataset = perms.get_for(request.user, Dataset.objects.all(), pk)
    errors: dict[str, str] = {}
    if request.method == "POST":
        perms.check(request.user, dataset, perms.EDIT)
        data = {k: request.POST.get(k, "") for k in MAPPING_FIELDS if k != "extra_fields"}
        data["extra_fields"] = [f.strip() for f in request.POST.get("extra_fields", "").split(",") if f.strip()]
        serializer = DatasetSerializer(dataset, data=data, partial=True, context=_ctx(request))
        if serializer.is_valid():
            serializer.save()
            return redirect("dataset", dataset.pk)
        errors = _flat_errors(serializer.errors)
    try:
        preview = [row for _, row in islice(iter_rows(Path(dataset.path), dataset.format, dataset.split), 20)]
    except DatasetFileError as exc:
        preview, errors = [], {**errors, "path": str(exc)}
    can_edit = perms.has_role(request.user, dataset.team_id, perms.EDIT)
    return render(request, "front/dataset_detail.html", {"dataset": dataset, "preview": preview, "errors": errors,
                                                         "can_edit": can_edit})  # fmt: skip


# --- rubrics ----------------------------------------------------------------------------
@login_required
def rubrics(request: HttpRequest) -> HttpResponse:
    rows = perms.visible(Rubric.objects.all(), request.user).distinct().select_related("team")
    return render(request, "front/rubrics.html", {"rubrics": rows})


@login_required
def rubric_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    rubric = perms.get_for(request.user, Rubric.objects.all(), pk) if pk else None
    can_edit = rubric is None or perms.has_role(request.user, rubric.team_id, perms.EDIT)
    spec = rubric.spec if rubric else {"criteria": [{"name": "correct", "kind": "exact_match", "weight": 1.0}]}
    meta = {"name": rubric.name if rubric else "", "description": rubric.description if rubric else "",
            "team": rubric.team_id if rubric else None}  # fmt: skip
    errors: dict[str, str] = {}
    tried: dict[str, Any] | None = None
    trial = {"prompt": "", "answer": "", "completions": "", "fields": "{}"}
    if request.method == "POST":
        spec, meta, errors = forms.read_rubric(request.POST)
        action = request.POST.get("action", "refresh")
        if action.startswith("remove-"):
            del spec["criteria"][int(action.split("-")[1])]
        elif action == "add":
            spec["criteria"].append({"name": f"c{len(spec['criteria']) + 1}", "kind": request.POST.get("new_kind")})
        elif action == "try":
            trial = {k: request.POST.get(f"try_{k}", "") for k in trial}
            may_edit = _may_edit_team(request.user, rubric.team_id if rubric else meta["team"])
            try:
                scored = spec_to_try(rubric.spec if rubric else None, spec, may_edit)  # the API's rule
                tried = try_rubric(scored, forms.trial_pairs(trial, request.POST, request.user))
            except (TryError, ValueError) as exc:
                errors.update(getattr(exc, "errors", {"try": str(exc)}))
        elif action == "save" and not errors:
            if not can_edit:
                perms.check(request.user, rubric, perms.EDIT)
            data = {**meta, "spec": spec}
            serializer = RubricSerializer(rubric, data=data, context=_ctx(request))
            if serializer.is_valid():
                perms.check(request.user, serializer.validated_data["team"], perms.EDIT)
                saved = serializer.save(**({} if rubric else {"created_by": request.user}))
                messages.success(request, "Rubric saved.")
                return redirect("rubric", saved.pk)
            errors.update(_flat_errors(serializer.errors))
    context = {
        "rubric": rubric, "meta": meta, "spec": spec, "criteria": forms.criteria_fields(spec, errors),
        "kinds": forms.KIND_NAMES, "errors": errors, "tried": tried, "trial": trial, "can_edit": can_edit,
        "teams": perms.editable_teams(request.user).distinct(),
        "datasets": perms.visible(Dataset.objects.all(), request.user).distinct(),
        "names": [c.get("name") for c in spec.get("criteria", [])],
    }  # fmt: skip
    return render(request, "front/rubric_edit.html", context)


def _may_edit_team(user, team_id) -> bool:
    """Whether the user is an owner or editor of the team with this id (a POSTed string or an int)."""
    if not str(team_id or "").isdigit():
        return False
    return perms.has_role(user, int(team_id), perms.EDIT)


# --- experiments ------------------------------------------------------------------------
@login_required
def experiments(request: HttpRequest) -> HttpResponse:
    rows = perms.visible(Experiment.objects.all(), request.user).distinct().select_related("team", "dataset", "rubric")
    return render(request, "front/experiments.html", {"experiments": rows})


@login_required
def experiment_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    experiment = perms.get_for(request.user, Experiment.objects.all(), pk, perms.EDIT) if pk else None
    source = None
    if experiment is None and request.GET.get("clone"):
        source = perms.get_for(request.user, Experiment.objects.all(), request.GET["clone"])
    base = experiment or source
    meta = forms.experiment_meta(base, request.POST if request.method == "POST" else None)
    config = base.config if base else {}
    errors: dict[str, str] = {}
    if request.method == "POST":
        config, errors = forms.read_experiment_config(request.POST)
        if not errors:
            data = {**meta, "config": config}
            serializer = ExperimentSerializer(experiment, data=data, context=_ctx(request))
            if serializer.is_valid():
                perms.check(request.user, serializer.validated_data["team"], perms.EDIT)
                saved = serializer.save(**({} if experiment else {"created_by": request.user}))
                return redirect("experiment", saved.pk)
            errors = _flat_errors(serializer.errors)
    context = {
        "experiment": experiment, "meta": meta, "sections": forms.experiment_sections(config, errors),
        "errors": errors, "teams": perms.editable_teams(request.user).distinct(),
        "datasets": perms.visible(Dataset.objects.all(), request.user).distinct(),
        "rubrics": perms.visible(Rubric.objects.all(), request.user).distinct(),
        "presets": PRESET_DESCRIPTIONS, "preset_values": {n: preset_values(n) for n in PRESET_DESCRIPTIONS},
    }  # fmt: skip
    return render(request, "front/experiment_edit.html", context)


@login_required
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = perms.get_for(request.user, Experiment.objects.select_related("dataset", "rubric"), pk)
    can_edit = perms.has_role(request.user, experiment.team_id, perms.EDIT)
    if request.method == "POST":
        perms.check(request.user, experiment, perms.EDIT)
        kind = "eval" if request.POST.get("kind") == "eval" else "train"
        try:
            spec = validate_for_team(experiment.spec_config(), experiment.team)
        except SpecError as exc:
            messages.error(request, f"Cannot launch: {exc}")
            return redirect("experiment", pk)
        if not experiment.dataset.is_valid:
            messages.error(request, "Cannot launch: the dataset has errors; fix its mapping first.")
            return redirect("experiment", pk)
        name = f"{experiment.name} #{experiment.runs.count() + 1}" + (" (eval)" if kind == "eval" else "")
        run = lifecycle.create_run(experiment.team, spec, kind=kind, name=name, experiment=experiment,
                                   user=request.user)  # fmt: skip
        return redirect(f"/runs/{run.pk}/")
    try:
        spec, spec_errors = validate_for_team(experiment.spec_config(), experiment.team), {}
    except SpecError as exc:
        spec, spec_errors = None, exc.errors
    runs = experiment.runs.order_by("-created")[:50]
    return render(request, "front/experiment_detail.html", {"experiment": experiment, "spec": spec, "runs": runs,
                  "spec_errors": spec_errors, "can_edit": can_edit})  # fmt: skip


# --- runs -------------------------------------------------------------------------------
@login_required
def runs(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        run = perms.get_for(request.user, Run.objects.all(), request.POST.get("run"), perms.EDIT)
        try:
            if request.POST.get("action") in ("resume", "evaluate"):
                act = lifecycle.resume if request.POST["action"] == "resume" else lifecycle.evaluate_checkpoint
                new = act(run, request.user)
                return redirect(f"/runs/{new.pk}/")
            lifecycle.request_cancel(run)
        except lifecycle.RunActionError as exc:
            messages.error(request, str(exc))
        return redirect("runs")
    lifecycle.sweep_lost_runs()
    rows = perms.visible(Run.objects.all(), request.user).distinct().select_related("experiment", "team")
    state = request.GET.get("state")
    if state:
        rows = rows.filter(state=state)
    return render(request, "front/runs.html", {"runs": rows.order_by("-created")[:200], "state": state})
