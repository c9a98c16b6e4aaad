"""The Celery app the studio enqueues through. Configuration only: no task code here.

The studio sends tasks by name (`app.send_task("workers.run_training", ...)`) so it never
imports `workers/`; the worker process (`celery -A workers.app worker`) registers them.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

app = Celery("studio")
app.config_from_object("django.conf:settings", namespace="CELERY")

TRAIN_TASK = "workers.run_training"
EVAL_TASK = "workers.run_eval"
SCORE_RUBRIC_TASK = "workers.score_rubric"
SCORING_STATE = "SCORING"  # score_rubric's state while criteria run, with {"running": [names], "pairs": n}
CHECK_DATASET_TASK = "workers.check_dataset"
TRY_ENVIRONMENT_TASK = "workers.try_environment"
TRYING_STATE = "TRYING"  # try_environment's state while it works, with {"stage": "loading the model" | ...}
SERVE_MODEL_TASK = "workers.serve_model"
EXPORT_CHECKPOINT_TASK = "workers.export_checkpoint"
