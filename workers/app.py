"""Worker entry: `celery -A workers.app worker -Q default,gpu`.

Uses the studio's Celery app (same broker and routing), sets up Django, and registers the tasks.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from studio.celery import app  # noqa: E402

# User reward code and model-written programs run in the trainer's sandbox; it covers these
# folders with an empty tmpfs, so such code never reads the database file, the secret key,
# other teams' uploads or checkpoints (trainers.sandbox.process, "hidden folders").
os.environ.setdefault("ROLLOUT_SANDBOX_HIDE", str(settings.DATA_DIR))
# Environment packages (verifiers tasksets) get virtual environments of their own here, made by the worker
# (trainers.rollout.environments.packages.venvs); a sandbox sees only the one folder its package is in.
os.environ.setdefault("ROLLOUT_ENV_PACKAGES_DIR", str(settings.DATA_DIR / "envs"))

# tasks: registered by name; gpu: Celery signal handlers (GPU pinning, fleet inventory, memory release);
# recovery: the runs' checkpoint on shutdown and their restart when their process dies
from workers import gpu, recovery, tasks  # noqa: E402, F401
from workers import suites as suite_tasks  # noqa: E402, F401 - workers.run_suite
from workers.serving import task as serving_task  # noqa: E402, F401 - workers.serve_model

__all__ = ["app"]
