"""The worker fleet: which Celery workers serve the studio, on which queues, with which GPUs.

Workers write these rows themselves (`workers.gpu`): once when they start, then on a
heartbeat. The studio only reads them. A worker is online while its heartbeats are
recent; one that stopped cleanly says so at once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

# A worker beats every HEARTBEAT_INTERVAL_S; three missed beats and it counts as offline.
MISSED_BEATS_OFFLINE = 3


def offline_after() -> timedelta:
    return timedelta(seconds=MISSED_BEATS_OFFLINE * settings.HEARTBEAT_INTERVAL_S)


class WorkerNodeQuerySet(models.QuerySet):
    def online(self) -> WorkerNodeQuerySet:
        return self.filter(stopped__isnull=True, last_seen__gte=timezone.now() - offline_after())


class WorkerNode(models.Model):
    hostname = models.CharField(max_length=255, unique=True, help_text="Celery node name, e.g. gpu@host-1.")
    queues = models.JSONField(default=list, help_text='Queues it consumes, e.g. ["gpu"].')
    gpus = models.JSONField(
        default=list, help_text="[{index, name, memory_total_gb, memory_used_gb, utilization}] at the last beat."
    )
    concurrency = models.PositiveIntegerField(default=1, help_text="Runs it executes at once (one per GPU).")
    started = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now, db_index=True)
    stopped = models.DateTimeField(null=True, blank=True, help_text="Set when the worker shut down cleanly.")

    objects = WorkerNodeQuerySet.as_manager()

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname

    @classmethod
    def record_start(cls, hostname: str, queues: list[str], gpus: list[dict[str, Any]], concurrency: int) -> WorkerNode:
        """Create or reset the row of a worker that just started."""
        now = timezone.now()
        node, _ = cls.objects.update_or_create(
            hostname=hostname,
            defaults={
                "queues": queues,
                "gpus": gpus,
                "concurrency": concurrency,
                "started": now,
                "last_seen": now,
                "stopped": None,
            },
        )
        return node

    @classmethod
    def record_beat(cls, hostname: str, gpus: list[dict[str, Any]] | None = None) -> bool:
        """Refresh last_seen (and the GPU readings when given); False when the row is gone."""
        fields: dict[str, Any] = {"last_seen": timezone.now(), "stopped": None}
        if gpus is not None:
            fields["gpus"] = gpus
        return cls.objects.filter(hostname=hostname).update(**fields) == 1

    @classmethod
    def record_stop(cls, hostname: str) -> None:
        cls.objects.filter(hostname=hostname).update(stopped=timezone.now())

    @property
    def is_online(self) -> bool:
        return self.stopped is None and self.last_seen >= timezone.now() - offline_after()

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def gpu_memory_total_gb(self) -> float:
        return round(sum(g.get("memory_total_gb", 0.0) for g in self.gpus), 1)

    @property
    def devices(self) -> list[str]:
        """Its GPUs as CUDA_VISIBLE_DEVICES names them (nvidia-smi's indices): what leases are taken on."""
        return [str(g["index"]) for g in self.gpus if isinstance(g, dict) and "index" in g]


class GpuLease(models.Model):
    """One GPU of one worker, held by one run while it runs or by one model server while it serves
    (studio.fleet.leases). The unique constraint is what keeps a GPU from serving two holders: two
    workers' pool processes racing for the same GPU cannot both insert its row."""

    worker = models.CharField(max_length=255, help_text="Celery node name, as WorkerNode.hostname.")
    device = models.CharField(max_length=64, help_text="The GPU, as CUDA_VISIBLE_DEVICES names it.")
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="gpu_leases")
    model_server = models.ForeignKey(
        "serving.ModelServer", null=True, blank=True, on_delete=models.CASCADE, related_name="gpu_leases"
    )
    taken = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["worker", "device"]
        constraints = [
            models.UniqueConstraint(fields=["worker", "device"], name="one_run_per_gpu"),
            models.CheckConstraint(
                condition=models.Q(run__isnull=False, model_server__isnull=True)
                | models.Q(run__isnull=True, model_server__isnull=False),
                name="gpu_lease_one_holder",
            ),
        ]

    def __str__(self) -> str:
        holder = f"run {self.run_id}" if self.run_id else f"model server {self.model_server_id}"
        return f"GPU {self.device} of {self.worker} → {holder}"
