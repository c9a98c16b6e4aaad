"""`/fleet/`: the workers and their GPUs, and the model servers that hold places, as a plain page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from studio.accounts.permissions import AnyTeamMember, is_team_member
from studio.fleet import leases, served
from studio.fleet.api import team_limits
from studio.fleet.models import WorkerNode


def sorted_for_display(nodes) -> list[WorkerNode]:
    """Online workers first, then by name (online is computed, so it sorts in Python)."""
    return sorted(nodes, key=lambda n: (not n.is_online, n.hostname))


def _run_holders(held: int, shares: int) -> str:
    """'a run', or on a shared GPU: '3 of its 4 shares: runs'."""
    return "a run" if shares <= 1 else f"runs ({held} of its {shares} shares)"


@login_required
def fleet_page(request: HttpRequest) -> HttpResponse:
    if not is_team_member(request.user):
        raise PermissionDenied(AnyTeamMember.message)
    nodes = sorted_for_display(WorkerNode.objects.all())
    for node in nodes:  # which GPUs a run or a model server holds now (studio.fleet.leases)
        free = set(leases.free_gpus(node.hostname, node.devices))
        serving = set(leases.held_by_servers(node.hostname))
        shares = leases.shares_in_use(node.hostname)
        for gpu in node.gpus:
            device = str(gpu.get("index"))
            gpu["in_use"] = device not in free
            gpu["holder"] = "a model server" if device in serving else _run_holders(*shares.get(device, (1, 1)))
    context = {
        "nodes": nodes,
        "online_count": sum(n.is_online for n in nodes),
        "servers": served.rows_for(request.user),
        "team_limits": team_limits(request.user),
    }
    return render(request, "fleet/page.html", context)
