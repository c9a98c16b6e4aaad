"""Worker entry: `celery -A workers.app worker -Q default,gpu`.

Uses the studio's Celery app (same broker and routing), sets up Django, and registers the tasks.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

import django  # noqa: E402

django.setup()

from studio.celery import app  # noqa: E402

# tasks: registered by name; gpu: Celery signal handlers (GPU pinning, fleet inventory, memory release)
from workers import gpu, tasks  # noqa: E402, F401

__all__ = ["app"]
