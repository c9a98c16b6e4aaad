"""The environments list and the environment editor (kind, params, limits; "try it" on a typed
prompt or a dataset row, with a model or a run's checkpoint)."""

from __future__ import annotations

import time

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from studio.accounts import permissions as perms
from studio.accounts.models import Team
from studio.datasets.models import Dataset
from studio.environments import forms, trying
from studio.environments.api import EnvironmentSerializer
from studio.environments.models import Environment
from studio.experiments.layout import known_models
from studio.lib.page_forms import flat_errors, serializer_context
from studio.lib.params import as_id
from studio.runs.models import Checkpoint

CHECKPOINTS_SHOWN = 20
# Error keys the try-it panel shows (the rest show beside their field or at the top).
TRY_KEYS = ("try", "detail", "rows", "model", "checkpoint", "episodes")
# The tries a browser session sent, {task id: sent at}: only its own session reads or stops one.
TRIES_KEY = "environment_tries"
TRIES_KEPT = 8


@login_required
def environments(request: HttpRequest) -> HttpResponse:
    rows = perms.visible(Environment.objects.all(), request.user).distinct().select_related("team")
    return render(request, "environments/list.html", {"environments": rows})


@login_required
def environment_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    environment = perms.get_for(request.user, Environment.objects.all(), pk) if pk else None
    can_edit = environment is None or perms.has_role(request.user, environment.team_id, perms.EDIT)
    kinds = forms.kind_names()
    config = environment.config if environment else {"kind": kinds[0] if kinds else "", "params": {}}
    meta = {"name": environment.name if environment else "", "team": environment.team_id if environment else None,
            "description": environment.description if environment else ""}  # fmt: skip
    errors: dict[str, str] = {}
    trying_id: str | None = None
    trial = {"prompt": "", "answer": "", "fields": "{}", "model": "", "checkpoint": "", "episodes": "2"}
    if request.method == "POST":
        config, meta, errors = forms.read_environment(request.POST)
        action = request.POST.get("action", "refresh")
        if action == "try" and not errors:
            trial = {k: request.POST.get(f"try_{k}", v) for k, v in trial.items()}
            trying_id = _try(request, environment, config, meta, trial, errors)
        elif action == "save" and not errors:
            if not can_edit:
                perms.check(request.user, environment, perms.EDIT)
            serializer = EnvironmentSerializer(environment, data={**meta, "config": config},
                                               context=serializer_context(request))  # fmt: skip
            if serializer.is_valid():
                perms.require(request.user, serializer.validated_data["team"], perms.EDIT)
                saved = serializer.save(**({} if environment else {"created_by": request.user}))
                messages.success(request, f"Environment saved (version {saved.version}).")
                return redirect("environment", saved.pk)
            errors.update(flat_errors(serializer.errors))
    kind = config.get("kind", "")
    names = {f.name for f in forms.params_fields(kind, {}, {}) + forms.limit_fields({}, {})}
    errors = forms.fold_errors(errors, names)
    params = forms.params_fields(kind, config.get("params") or {}, errors)
    limits = forms.limit_fields(config, errors)
    beside = {f.name for f in params + limits} | {f"{forms.PREFIX}kind"}  # errors shown beside their field
    context = {
        "environment": environment, "meta": meta, "config": config, "kind": kind, "kinds": kinds,
        "kind_doc": forms.kind_doc(kind), "kind_error": errors.get("config.kind", ""), "errors": errors, "can_edit": can_edit,
        "params": params, "limits": limits,
        "tool_kinds": forms.tool_kinds() if any(f.picker == forms.TOOLS_PARAM for f in params) else None,
        "other_errors": {k: v for k, v in errors.items() if k not in beside and not _try_error(k)},
        "try_errors": {k: v for k, v in errors.items() if _try_error(k)},
        "trying_id": trying_id, "trial": trial, "training_note": trying.training_note(),
        "teams": perms.editable_teams(request.user).distinct(),
        "datasets": perms.visible(Dataset.objects.all(), request.user).distinct(),
        "models": known_models(request.user), "checkpoints": _checkpoints(request.user),
        "versions": environment.versions.all()[:20] if environment else [],
    }  # fmt: skip
    return render(request, "environments/edit.html", context)


def _try_error(key: str) -> bool:
    return key.split(".")[0] in TRY_KEYS


def _try(request, environment, config, meta, trial, errors) -> str | None:
    """Send the episodes to a worker, remembered in the session; the task's id, or None with the
    reason in `errors` (keyed as the try panel shows them). The page follows it (try_progress)."""
    team = environment.team if environment else _team(request.user, meta["team"])
    may_edit = team is not None and perms.has_role(request.user, team.pk, perms.EDIT)
    try:
        if team is None:
            raise trying.TryError({"try": "choose one of your teams"})
        tried_config = trying.config_to_try(environment.config if environment else None, config, may_edit)
        checkpoint = as_id(trial["checkpoint"])
        model = trying.model_to_try(team, trial["model"].strip(), checkpoint)
        episodes = int(trial["episodes"]) if trial["episodes"].isdigit() else 0
        task_id = trying.send_try(tried_config, model, forms.trial_rows(trial, request.POST, request.user),
                                  episodes, team=team)  # fmt: skip
    except trying.TryError as exc:
        errors.update(exc.errors)
        return None
    except ValueError as exc:
        errors["try"] = str(exc)
        return None
    tries = dict(list(request.session.get(TRIES_KEY, {}).items())[-(TRIES_KEPT - 1):])
    tries[task_id] = time.time()
    request.session[TRIES_KEY] = tries
    return task_id


def _sent_at(request: HttpRequest, task_id: str) -> float:
    """When this session sent the try; 404 for a try it did not send (another person's, or none)."""
    sent = request.session.get(TRIES_KEY, {}).get(task_id)
    if sent is None:
        raise Http404("no such try in this session")
    return float(sent)


@login_required
@require_GET
def try_progress(request: HttpRequest, task_id: str) -> JsonResponse:
    """Where the session's try is (studio.environments.trying.progress), with its episodes drawn as the
    page draws them once they are back."""
    now = trying.progress(task_id, _sent_at(request, task_id))
    episodes = now.pop("episodes", None)
    if episodes is not None:
        now["html"] = render_to_string("environments/tried.html", {"tried": {"episodes": episodes}}, request)
    if now["state"] in ("done", "failed"):
        tries = request.session.get(TRIES_KEY, {})
        tries.pop(task_id, None)
        request.session[TRIES_KEY] = tries
    return JsonResponse(now)


@login_required
@require_POST
def try_stop(request: HttpRequest, task_id: str) -> JsonResponse:
    _sent_at(request, task_id)
    trying.stop(task_id)
    return JsonResponse({"stopped": task_id})


def _team(user, team_id) -> Team | None:
    team_id = as_id(team_id)
    return None if team_id is None else perms.visible_teams(user).filter(pk=team_id).first()


def _checkpoints(user) -> list[Checkpoint]:
    """The latest checkpoints of the runs of the user's teams, newest first (one query)."""
    rows = Checkpoint.objects.filter(run__team__in=perms.visible_teams(user)).select_related("run")
    return list(rows.order_by("-created")[:CHECKPOINTS_SHOWN])
