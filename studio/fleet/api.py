"""`/api/fleet/`: the workers and their GPUs, as JSON."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers
from rest_framework.exceptions import ValidationError

from studio.accounts.permissions import AnyTeamMember
from studio.fleet import leases
from studio.fleet.models import WorkerNode
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
