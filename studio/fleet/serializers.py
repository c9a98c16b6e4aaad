from rest_framework import serializers

from studio.fleet.models import WorkerNode


class WorkerNodeSerializer(serializers.ModelSerializer):
    online = serializers.BooleanField(source="is_online", read_only=True)
    gpu_count = serializers.IntegerField(read_only=True)
    gpu_memory_total_gb = serializers.FloatField(read_only=True)

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
            "online",
            "started",
            "last_seen",
            "stopped",
        ]
        read_only_fields = fields
