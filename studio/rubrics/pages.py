"""The rubrics list and the rubric editor (criteria forms, "try it" on typed or dataset rows)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from studio.accounts import permissions as perms
from studio.datasets.models import Dataset
from studio.lib.page_forms import flat_errors, serializer_context
from studio.lib.params import as_id
from studio.rubrics import forms
from studio.rubrics.api import RubricSerializer
from studio.rubrics.models import Rubric
from studio.rubrics.scoring import TryError, rubric_warnings, spec_to_try, try_rubric

NEW_RUBRIC = {"criteria": [{"name": "correct", "kind": "exact_match", "weight": 1.0}]}


@login_required
def rubrics(request: HttpRequest) -> HttpResponse:
    rows = perms.visible(Rubric.objects.all(), request.user).distinct().select_related("team")
    return render(request, "rubrics/list.html", {"rubrics": rows})


@login_required
def rubric_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    rubric = perms.get_for(request.user, Rubric.objects.all(), pk) if pk else None
    can_edit = rubric is None or perms.has_role(request.user, rubric.team_id, perms.EDIT)
    spec = rubric.spec if rubric else NEW_RUBRIC
    meta = {"name": rubric.name if rubric else "", "description": rubric.description if rubric else "",
            "team": rubric.team_id if rubric else None}  # fmt: skip
    errors: dict[str, str] = {}
    status = 200
    tried: dict[str, Any] | None = None
    trial = {"prompt": "", "answer": "", "completions": "", "fields": "{}"}
    if request.method == "POST":
        spec, meta, errors = forms.read_rubric(request.POST)
        action = request.POST.get("action", "refresh")
        if action.startswith("remove-"):
            index = _criterion_index(action.removeprefix("remove-"), spec["criteria"])
            if index is None:
                errors["action"] = f"no criterion {action.removeprefix('remove-')[:20]!r} to remove"
                status = 400
            else:
                del spec["criteria"][index]
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
        elif action not in ("refresh", "save"):  # not a button of the editor
            errors["action"] = f"unknown action {action[:40]!r}"
            status = 400
        elif action == "save" and not errors:
            if not can_edit:
                perms.check(request.user, rubric, perms.EDIT)
            serializer = RubricSerializer(rubric, data={**meta, "spec": spec}, context=serializer_context(request))
            if serializer.is_valid():
                perms.require(request.user, serializer.validated_data["team"], perms.EDIT)
                saved = serializer.save(**({} if rubric else {"created_by": request.user}))
                messages.success(request, "Rubric saved.")  # its warnings show on the page it redirects to
                return redirect("rubric", saved.pk)
            errors.update(flat_errors(serializer.errors))
    context = {
        "rubric": rubric, "meta": meta, "spec": spec, "criteria": forms.criteria_fields(spec, errors),
        "kinds": forms.KIND_NAMES, "errors": errors, "warnings": {} if errors else rubric_warnings(spec), "tried": tried, "trial": trial, "can_edit": can_edit,
        "teams": perms.editable_teams(request.user).distinct(),
        "datasets": perms.visible(Dataset.objects.all(), request.user).distinct(),
        "names": [c.get("name") for c in spec.get("criteria", [])],
    }  # fmt: skip
    return render(request, "rubrics/edit.html", context, status=status)


def _criterion_index(raw: str, criteria: list) -> int | None:
    """The index a "remove-<i>" button names, None for anything that names no criterion."""
    index = as_id(raw) if raw != "0" else 0
    return index if index is not None and index < len(criteria) else None


def _may_edit_team(user, team_id) -> bool:
    """Whether the user is an owner or editor of the team with this id (a POSTed string or an int)."""
    team_id = as_id(team_id)
    return team_id is not None and perms.has_role(user, team_id, perms.EDIT)
