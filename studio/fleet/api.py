"""`/api/fleet/`: the workers and their GPUs, as JSON."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from studio.accounts.permissions import AnyTeamMember, visible_teams
from studio.fleet import leases, quotas
from studio.fleet.models import TeamQuota, WorkerNode
from studio.lib.api_schema import flag_parameter
from studio.lib.params import QueryError, flag_param


class WorkerNodeSerializer(serializers.ModelSerializer):
    online = serializers.BooleanField(source="is_online", read_only=True)
    gpu_count = serializers.IntegerField(read_only=True)
    gpu_memory_total_gb = serializers.FloatField(read_only=True)
    free_gpus = serializers.SerializerMethodField(help_text="Its GPUs no run holds (studio.fleet.leases).")

    def get_free_gpus(self, node: WorkerNode) -> list[str]:
        return leases.free_gpus(node.hostname, node.devices)

    class Meta:
        model = WorkerNode
        fields = [
            "id",
            "hostname",
            "queues",
            "concurrency",
            "gpus",
            "gpu_count",
            "gpu_memory_total_gb",
            "free_gpus",
            "online",
            "started",
            "last_seen",
            "stopped",
        ]
        read_only_fields = fields


@extend_schema(parameters=[flag_parameter("online", "true: online workers only.")])
class WorkerNodeList(generics.ListAPIView):
    """Every worker that ever reported, online ones first; `?online=1` for online ones only."""

    serializer_class = WorkerNodeSerializer
    permission_classes = [permissions.IsAuthenticated, AnyTeamMember]
    pagination_class = None  # a fleet is tens of machines, not thousands

    def get_queryset(self):
        nodes = WorkerNode.objects.all()
        try:
            online_only = flag_param(self.request.query_params, "online")
        except QueryError as exc:
            raise ValidationError({exc.field: str(exc)}) from None
        if online_only:
            nodes = nodes.online()
        return nodes


class LimitSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="max_running_runs, max_gpus, gpu_hours_per_day or gpu_hours_per_month.")
    limit = serializers.FloatField(allow_null=True, help_text="The operator's limit; null: none.")
    used = serializers.FloatField(help_text="What the team uses of it now (runs, GPUs, GPU-hours).")
    words = serializers.CharField()


class TeamQuotaSerializer(serializers.Serializer):
    team_id = serializers.IntegerField()
    team = serializers.CharField()
    note = serializers.CharField(help_text="The operator's note, if any.")
    limits = LimitSerializer(many=True)


def team_limits(user) -> list[dict]:
    """The limits of each team `user` is in, with what the team uses of them (studio.fleet.quotas.summary)."""
    notes = dict(TeamQuota.objects.filter(team__in=visible_teams(user)).values_list("team_id", "note"))
    return [{"team_id": team.pk, "team": team.name, "note": notes.get(team.pk, ""),
             "limits": [limit.as_dict() for limit in quotas.summary(team)]}
            for team in visible_teams(user).order_by("name")]  # fmt: skip


class TeamQuotaList(generics.GenericAPIView):
    """The limits the operator set for each of your teams (read-only; the operator edits them in the admin) and
    what each team uses of them now. Another team's limits are not shown."""

    serializer_class = TeamQuotaSerializer
    permission_classes = [permissions.IsAuthenticated, AnyTeamMember]
    pagination_class = None

    @extend_schema(responses=TeamQuotaSerializer(many=True))
    def get(self, request):
        return Response(team_limits(request.user))
