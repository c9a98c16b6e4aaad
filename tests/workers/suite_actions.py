"""Suite actions of a user, as a child process of a test that runs a real Celery worker against a SQLite file
(see tests/workers/studio_actions.py, whose first launch made the demo team and experiment):

    python -m tests.workers.suite_actions attach EVERY_N   # a two-task suite on the demo experiment's dataset,
                                                           # run on every EVERY_N-th checkpoint: prints its id
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

import django  # noqa: E402

django.setup()

from studio.bootstrap import bootstrap  # noqa: E402
from studio.evaluations.models import Suite, TrainingSuite  # noqa: E402
from studio.experiments.models import Experiment  # noqa: E402
from studio.rubrics.models import Rubric  # noqa: E402


def regex(pattern: str) -> dict:
    return {"criteria": [{"name": "match", "kind": "regex", "params": {"pattern": pattern}}]}


def main(action: str, argument: str) -> None:
    bootstrap()
    experiment = Experiment.objects.order_by("pk").first()
    if action != "attach":
        raise SystemExit(f"unknown action {action!r}")
    team = experiment.team
    rubrics = [Rubric.objects.create(team=team, name=n, spec=regex(p)) for n, p in (("any", r"[\s\S]*"), ("a", "a"))]
    tasks = [{"name": "anything", "dataset": experiment.dataset_id, "rubric": rubrics[0].pk, "samples_per_prompt": 2,
              "num_prompts": 3},
             {"name": "has-a", "dataset": experiment.dataset_id, "rubric": rubrics[1].pk, "samples_per_prompt": 4,
              "num_prompts": 2}]  # fmt: skip
    suite = Suite.objects.create(team=team, name="letters", tasks=tasks, rollout={"max_new_tokens": 4})
    TrainingSuite.objects.create(team=team, experiment=experiment, suite=suite, every_n_checkpoints=int(argument))
    print(suite.pk)


if __name__ == "__main__":
    main(*sys.argv[1:3])
