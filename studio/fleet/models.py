"""The worker fleet: which Celery workers serve the studio, on which queues, with which GPUs.

Workers write these rows themselves (`workers.gpu`): once when they start, then on a
heartbeat. The studio only reads them. A worker is online while its heartbeats are
recent; one that stopped cleanly says so at once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
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
    """One share of one GPU of one worker, held by one run while it runs or by one model server while it
    serves (studio.fleet.leases). A worker that does not share its GPUs splits each into one share (slot 0),
    so a lease is a whole GPU; one with settings.GPU_SHARE = N splits each into N (slots 0..N-1), and a
    holder of the whole GPU holds all N. The unique constraint is what keeps a share from serving two
    holders: two workers' pool processes racing for the same share cannot both insert its row."""

    worker = models.CharField(max_length=255, help_text="Celery node name, as WorkerNode.hostname.")
    device = models.CharField(max_length=64, help_text="The GPU, as CUDA_VISIBLE_DEVICES names it.")
    slot = models.PositiveSmallIntegerField(default=0, help_text="Which share of the GPU (0 to shares - 1).")
    shares = models.PositiveSmallIntegerField(
        default=1, help_text="How many shares the worker split the GPU into when this was taken (STUDIO_GPU_SHARE)."
    )
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="gpu_leases")
    model_server = models.ForeignKey(
        "serving.ModelServer", null=True, blank=True, on_delete=models.CASCADE, related_name="gpu_leases"
    )
    taken = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["worker", "device"]
        constraints = [
            models.UniqueConstraint(fields=["worker", "device", "slot"], name="one_holder_per_gpu_share"),
            models.CheckConstraint(
                condition=models.Q(run__isnull=False, model_server__isnull=True)
                | models.Q(run__isnull=True, model_server__isnull=False),
                name="gpu_lease_one_holder",
            ),
        ]

    def __str__(self) -> str:
        holder = f"run {self.run_id}" if self.run_id else f"model server {self.model_server_id}"
        share = f" (share {self.slot + 1} of {self.shares})" if self.shares > 1 else ""
        return f"GPU {self.device}{share} of {self.worker} → {holder}"

    @property
    def fraction(self) -> float:
        """The part of its GPU this lease is: what a team's GPU limit counts."""
        return 1.0 / max(1, self.shares)


class TeamQuota(models.Model):
    """What the operator lets one team use at once and over time (studio.fleet.quotas); the queue holds back
    the team's runs past a limit and says which. Empty fields are no limit; a team without a row has none."""

    team = models.OneToOneField("accounts.Team", on_delete=models.CASCADE, related_name="quota")
    max_running_runs = models.PositiveIntegerField(
        null=True, blank=True, help_text="Runs of the team running at once (empty: no limit)."
    )
    max_gpus = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0)],
        help_text="GPUs its running runs hold at once; a shared GPU's share counts as its part (empty: no limit).",
    )  # fmt: skip
    gpu_hours_per_day = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0)],
        help_text="GPU-hours its runs may use per day, from 00:00 UTC (empty: no limit).",
    )  # fmt: skip
    gpu_hours_per_month = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0)],
        help_text="GPU-hours its runs may use per calendar month, UTC (empty: no limit).",
    )  # fmt: skip
    note = models.CharField(max_length=200, blank=True, help_text="Why, for the team to read (optional).")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__name"]

    def __str__(self) -> str:
        return f"limits of {self.team}"

    @property
    def is_unlimited(self) -> bool:
        return all(getattr(self, name) is None for name in LIMIT_FIELDS)


LIMIT_FIELDS = ("max_running_runs", "max_gpus", "gpu_hours_per_day", "gpu_hours_per_month")
