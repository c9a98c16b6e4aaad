from django.contrib import admin

from studio.fleet.models import WorkerNode


@admin.register(WorkerNode)
class WorkerNodeAdmin(admin.ModelAdmin):
    list_display = ("hostname", "concurrency", "last_seen", "stopped")
    readonly_fields = ("hostname", "queues", "gpus", "concurrency", "started", "last_seen", "stopped")
