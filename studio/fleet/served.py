"""The model servers on the fleet page (studio.serving's ModelServer rows whose worker task holds a
place, and maybe a GPU): model, worker, state, idle time; owners and editors of the model's team stop one."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from studio.accounts.permissions import EDIT, VIEW, role_allows, role_in
from studio.fleet import holders
from studio.serving.models import READY, STARTING, STOPPED, STOPPING, ModelServer


@dataclass(frozen=True)
class ServedRow:
    server: ModelServer
    model: str  # its ref for its team's members, "another team's model" for the others
    started_by: str  # for its team's members only
    gpus: str
    idle: str
    can_stop: bool


def rows_for(user) -> list[ServedRow]:
    """The servers that hold a place now, as the user may see them."""
    out = []
    for server in holders.live_servers_anywhere():
        role = role_in(user, holders.team_of(server) or 0)
        devices = ", ".join(sorted(lease.device for lease in server.gpu_leases.all())) or "CPU"
        idle = holders.idle_words(server) if server.state == READY else ""
        member = role_allows(role, VIEW)
        model, by = (server.ref, server.started_by) if member else ("another team's model", "")
        out.append(ServedRow(server, model, by, devices, idle, role_allows(role, EDIT)))
    return out


@login_required
@require_POST
def stop_server(request: HttpRequest, server_id: int) -> HttpResponse:
    """Ask the server's worker task to stop it (it watches its row): owners and editors of its team."""
    server = ModelServer.objects.filter(pk=server_id).first()
    role = role_in(request.user, holders.team_of(server) or 0) if server else None
    if not role_allows(role, VIEW):
        raise Http404("no such model server")
    if not role_allows(role, EDIT):
        raise PermissionDenied("only owners and editors of its team stop a model server")
    with transaction.atomic():
        row = ModelServer.objects.select_for_update().get(pk=server_id)
        if row.state == STARTING and not row.worker:  # no task took it yet: nothing to tell, it simply ends
            row.state = STOPPED
        elif row.state in (STARTING, READY):
            row.state = STOPPING
        row.save(update_fields=["state"])
    return redirect("fleet")
