"""Runs on several machines (parallel.nodes > 1): the worker's side of trainers.scale.ray_cluster.

workers.launch.run_processes hands such a run here (`run_group`). The Celery task stays the run's owner
and becomes the Ray driver: it connects to the cluster named by settings.RAY_ADDRESS, starts the ranks
with Ray Train, replays rank 0's reports into the run's DatabaseReporter from its own thread (the ranks
never touch the database), and passes its cancel check to the ranks as the mailbox's stop flag. The
task's heartbeat (workers.tasks) goes on meanwhile. A rank that dies or raises, or a cluster that
cannot take the run, ends the run "failed" with a message naming the rank, its machine and its error;
the failed ranks' tracebacks and the tail of their Ray logs are the run's last log lines, which the
run's error quotes.

Ray is optional: trainers.scale.ray_cluster imports it only when a run starts, and a worker without it
refuses such runs with that reason.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from django.conf import settings

from trainers.report import Reporter, RunResult
from trainers.scale.ray_cluster import ClusterError, RankFailed, train_on_ray


def run_group(spec: Any, reporter: Reporter, should_stop: Callable[[], bool]) -> RunResult:
    """Run `spec` on the Ray cluster to its end; the result has `status` and `detail`."""
    if importlib.util.find_spec("ray") is None:
        raise RuntimeError(
            "this worker cannot start runs on several nodes: Ray is not installed in its environment "
            "(./studioctl setup installs it where it can; see docs/gpu-workers.md)"
        )
    try:
        return train_on_ray(
            spec,
            reporter,
            should_stop,
            address=settings.RAY_ADDRESS,
            stop_grace_s=getattr(settings, "RUN_STOP_GRACE_S", 120.0),
        )
    except (ClusterError, RankFailed) as exc:  # explained; the details are in the run's log already
        return RunResult("failed", 0, detail=str(exc))
