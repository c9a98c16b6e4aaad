from django.contrib import admin

from studio.fleet import quotas
from studio.fleet.models import TeamQuota, WorkerNode


@admin.register(WorkerNode)
class WorkerNodeAdmin(admin.ModelAdmin):
    list_display = ("hostname", "concurrency", "last_seen", "stopped")
    readonly_fields = ("hostname", "queues", "gpus", "concurrency", "started", "last_seen", "stopped")


@admin.register(TeamQuota)
class TeamQuotaAdmin(admin.ModelAdmin):
    """The operator's limits per team (studio.fleet.quotas). Saving or deleting them makes the team's waiting
    runs ask again: their pages drop the old words at once, and each is tried at its next retry."""

    list_display = ("team", "max_running_runs", "max_gpus", "gpu_hours_per_day", "gpu_hours_per_month", "updated")
    fields = ("team", "max_running_runs", "max_gpus", "gpu_hours_per_day", "gpu_hours_per_month", "note")
    search_fields = ("team__name",)

    def save_model(self, request, obj: TeamQuota, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        quotas.limits_changed(obj.team_id)

    def delete_model(self, request, obj: TeamQuota) -> None:
        team_id = obj.team_id
        super().delete_model(request, obj)
        quotas.limits_changed(team_id)

    def delete_queryset(self, request, queryset) -> None:
        teams = list(queryset.values_list("team_id", flat=True))
        super().delete_queryset(request, queryset)
        for team_id in teams:
            quotas.limits_changed(team_id)
