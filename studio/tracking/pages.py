"""Pages: a team's trackers (secrets and default mirror settings) and an experiment's mirror settings.
Both POST to the same services as the API; a secret's value goes in and never comes back out."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from studio.accounts import permissions as perms
from studio.accounts.models import Team
from studio.experiments.models import Experiment
from studio.lib.schema_form import FormField, fields_for, read_fields
from studio.tracking import services
from studio.tracking.models import TrackerSecret
from studio.tracking.schema import TRACKERS, MirrorSettings


def settings_fields(values: dict[str, Any], errors: dict[str, str]) -> list[FormField]:
    schema = MirrorSettings.model_json_schema()
    return fields_for(schema, schema, "", values, errors)


def _groups(fields: list[FormField]) -> list[tuple[str, list[FormField]]]:
    """The fields by tracker, then the limits."""
    by = {name: [f for f in fields if f.name.startswith(f"{name}.")] for name in TRACKERS}
    rest = [f for f in fields if "." not in f.name]
    return [*by.items(), ("limits", rest)]


def _read_settings(post) -> tuple[dict[str, Any], dict[str, str]]:
    return read_fields(settings_fields({}, {}), post)


@login_required
def team_trackers(request: HttpRequest, team_id: int) -> HttpResponse:
    team = perms.get_for(request.user, Team.objects.all(), team_id, perms.VIEW)
    is_owner = perms.role_allows(team.role_of(request.user), perms.MANAGE)
    errors: dict[str, str] = {}
    values = services.team_defaults(team).model_dump()
    if request.method == "POST":
        perms.check(request.user, team, perms.MANAGE)
        try:
            if "set_secret" in request.POST:
                post = request.POST
                services.set_secret(team, post.get("name", "").strip(), post.get("kind", ""), post.get("value", ""),
                                    request.user, endpoint=post.get("endpoint", ""))  # fmt: skip
                messages.success(request, f"Secret {post.get('name', '').strip()!r} saved.")
                return redirect("team-trackers", team_id=team.pk)
            if "delete_secret" in request.POST:
                TrackerSecret.objects.filter(team=team, name=request.POST.get("name", "")).delete()
                return redirect("team-trackers", team_id=team.pk)
            values, errors = _read_settings(request.POST)
            if not errors:
                saved = services.save_team_defaults(team, values)
                _say_cleared(request, saved)
                messages.success(request, "Default mirror settings saved.")
                return redirect("team-trackers", team_id=team.pk)
        except services.TrackingError as exc:
            errors = exc.errors
            messages.error(request, str(exc))
        except Exception as exc:  # a name the model refuses (full_clean)
            if type(exc).__name__ != "ValidationError":
                raise
            messages.error(request, "; ".join(getattr(exc, "messages", [str(exc)])))
    context = {
        "team": team, "is_owner": is_owner, "kinds": TRACKERS,
        "secrets": TrackerSecret.objects.filter(team=team).select_related("created_by"),
        "groups": _groups(settings_fields(values, errors)),
    }  # fmt: skip
    return render(request, "tracking/team.html", context)


@login_required
def experiment_trackers(request: HttpRequest, experiment_id: int) -> HttpResponse:
    experiment = perms.get_for(request.user, Experiment.objects.select_related("team"), experiment_id, perms.VIEW)
    can_edit = perms.has_role(request.user, experiment.team_id, perms.EDIT)
    inherit, chosen = services.experiment_settings(experiment)
    values, errors, status = chosen.model_dump(), {}, 200
    if request.method == "POST":
        perms.check(request.user, experiment, perms.EDIT)
        inherit = request.POST.get("inherit") == "1"
        values, errors = ({}, {}) if inherit else _read_settings(request.POST)
        if not errors:
            try:
                saved = services.save_experiment_settings(experiment, inherit, values, request.user)
                _say_cleared(request, saved)
                messages.success(request, "Mirror settings saved.")
                return redirect("experiment-trackers", experiment_id=experiment.pk)
            except services.TrackingError as exc:
                errors = exc.errors
                messages.error(request, str(exc))
            except services.MoveRefused as exc:
                messages.error(request, str(exc))
                status = 403
    context = {
        "experiment": experiment, "can_edit": can_edit, "inherit": inherit,
        "secrets": TrackerSecret.objects.filter(team=experiment.team),
        "groups": _groups(settings_fields(values, errors)),
    }  # fmt: skip
    return render(request, "tracking/experiment.html", context, status=status)


def _say_cleared(request: HttpRequest, saved: services.Saved) -> None:
    for field, why in saved.cleared.items():
        messages.warning(request, f"{field} cleared: {why}.")
