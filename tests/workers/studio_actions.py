"""What a user does in the studio, as a child process of a test that runs a real Celery worker against
a SQLite file (the test process's own Django database is pytest's, not the worker's):

    python -m tests.workers.studio_actions launch OVERRIDES_JSON   # the demo experiment, launched: prints the run id
    python -m tests.workers.studio_actions cancel RUN_ID

The first launch makes the first user, team and demo experiment (studio.bootstrap, as `./studioctl up` does).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from studio.bootstrap import bootstrap  # noqa: E402
from studio.experiments import services  # noqa: E402
from studio.experiments.models import Experiment  # noqa: E402
from studio.runs import lifecycle  # noqa: E402
from studio.runs.models import Run  # noqa: E402


def main(action: str, argument: str) -> None:
    bootstrap()
    user = get_user_model().objects.order_by("pk").first()
    if action == "launch":
        experiment = Experiment.objects.order_by("pk").first()
        run = services.launch(experiment, user, overrides=json.loads(argument))
        print(run.pk)
    elif action == "cancel":
        print(lifecycle.request_cancel(Run.objects.get(pk=int(argument))).state)
    else:
        raise SystemExit(f"unknown action {action!r}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
