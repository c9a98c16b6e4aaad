"""`/api/fleet/` (JSON) and `/fleet/` (a plain page): the workers and their GPUs."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework import generics, permissions

from studio.fleet.models import WorkerNode
from studio.fleet.permissions import TeamMember, is_team_member
from studio.fleet.serializers import WorkerNodeSerializer


class WorkerNodeList(generics.ListAPIView):
    """Every worker that ever reported, online ones first; `?online=1` for online ones only."""

    serializer_class = WorkerNodeSerializer
    permission_classes = [permissions.IsAuthenticated, TeamMember]
    pagination_class = None  # a fleet is tens of machines, not thousands

    def get_queryset(self):
        nodes = WorkerNode.objects.all()
        if self.request.query_params.get("online") in ("1", "true"):
            nodes = nodes.online()
        return nodes


def sorted_for_display(nodes) -> list[WorkerNode]:
    """Online workers first, then by name (online is computed, so it sorts in Python)."""
    return sorted(nodes, key=lambda n: (not n.is_online, n.hostname))


@login_required
def fleet_page(request: HttpRequest) -> HttpResponse:
    if not is_team_member(request.user):
        raise PermissionDenied("only members of a team may see the workers")
    nodes = sorted_for_display(WorkerNode.objects.all())
    return render(request, "fleet/page.html", {"nodes": nodes, "online_count": sum(n.is_online for n in nodes)})
