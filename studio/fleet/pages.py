"""`/fleet/`: the workers and their GPUs, as a plain page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from studio.accounts.permissions import AnyTeamMember, is_team_member
from studio.fleet import leases
from studio.fleet.models import WorkerNode


def sorted_for_display(nodes) -> list[WorkerNode]:
    """Online workers first, then by name (online is computed, so it sorts in Python)."""
    return sorted(nodes, key=lambda n: (not n.is_online, n.hostname))


@login_required
def fleet_page(request: HttpRequest) -> HttpResponse:
    if not is_team_member(request.user):
        raise PermissionDenied(AnyTeamMember.message)
    nodes = sorted_for_display(WorkerNode.objects.all())
    for node in nodes:  # which GPUs a run holds now (studio.fleet.leases)
        free = set(leases.free_gpus(node.hostname, node.devices))
        for gpu in node.gpus:
            gpu["in_use"] = str(gpu.get("index")) not in free
    return render(request, "fleet/page.html", {"nodes": nodes, "online_count": sum(n.is_online for n in nodes)})
