"""The home page (recent runs and experiments of your teams) and the teams page."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from rest_framework.authtoken.models import Token

from studio.accounts import permissions as perms
from studio.accounts import services
from studio.accounts.models import ROLES, VIEWER, Team
from studio.bootstrap import DEMOS, first_login_path
from studio.experiments.models import Experiment
from studio.runs.models import Run


class SignIn(auth_views.LoginView):
    """The sign-in page. It names the file the first start kept the first login in, where it really is
    (the data folder may be elsewhere than var/: STUDIO_DATA_DIR), and only while it is there."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        path = first_login_path()
        context["first_login_file"] = shown_path(path) if path.is_file() else ""
        return context


def shown_path(path: Path) -> str:
    """A path as a person finds it: relative to the studio's folder (where ./studioctl runs) when inside it."""
    try:
        return str(path.resolve().relative_to(Path(settings.BASE_DIR).resolve()))
    except (ValueError, OSError):
        return str(path)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    runs = perms.visible(Run.objects.all(), request.user).distinct().select_related("experiment")[:20]
    visible = perms.visible(Experiment.objects.all(), request.user).distinct()
    experiments = visible[:10]
    found = {e.name: e for e in visible.filter(name__in=[name for name, _ in DEMOS]).order_by("-pk")}
    demos = [(found[name], what) for name, what in DEMOS if name in found]  # the first of each name
    return render(request, "accounts/home.html", {"runs": runs, "experiments": experiments, "demos": demos})


@login_required
def teams(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        try:
            if "create_team" in request.POST:
                services.create_team(request.POST.get("name", ""), request.user)
            elif "add_member" in request.POST:
                team = perms.get_for(request.user, Team.objects.all(), request.POST.get("team"), perms.MANAGE)
                services.add_member(team, request.POST.get("username", ""), request.POST.get("role", VIEWER))
            elif "token" in request.POST:
                Token.objects.get_or_create(user=request.user)
        except services.TeamActionError as exc:
            messages.error(request, f"{str(exc)[:1].upper()}{str(exc)[1:]}.")
        return redirect("teams")
    my_teams = perms.visible_teams(request.user).prefetch_related("memberships__user").distinct()
    rows = [(team, team.role_of(request.user)) for team in my_teams]
    token = Token.objects.filter(user=request.user).first()
    # A new member starts as a viewer (least privilege): the owner raises the role on purpose.
    context = {"teams": rows, "roles": ROLES, "default_role": VIEWER, "token": token}
    return render(request, "accounts/teams.html", context)
