"""Suites while a run trains: when a training run of an experiment with a TrainingSuite saves its Nth, 2Nth...
checkpoint, a suite run of that checkpoint is launched once the checkpoint's row is committed. Its job goes to
the queue like any evaluation (a worker place of its own), so training never waits for it; the worker writes
the scores as the training run's metric points `suite/<task>/reward_mean|pass@1|pass@<k>` (each with _low and
_high) at the checkpoint's step (workers.suites), which the run page draws as curves.

A launch that is refused (the suite's dataset deleted since, a path the policy now refuses) never fails the
training run: it becomes a warning on it, saying why."""

from __future__ import annotations

import logging

from django.db import transaction

from studio.evaluations import services
from studio.evaluations.models import SuiteRun, TrainingSuite
from studio.lib.errors import FieldErrors
from studio.runs import events
from studio.runs.models import STUDIO_SOURCE, Checkpoint

log = logging.getLogger(__name__)


def checkpoint_saved(sender, instance: Checkpoint, created: bool, **kwargs) -> None:
    """post_save of a Checkpoint: schedule its suite run, after the commit that writes the row."""
    if created and not kwargs.get("raw"):
        checkpoint_id = instance.pk
        transaction.on_commit(lambda: launch_for(checkpoint_id))


def launch_for(checkpoint_id: int) -> SuiteRun | None:
    """The suite run of a training run's checkpoint, when its experiment has a suite and the checkpoint is an
    Nth one; None otherwise (and for a step that has one already: a resumed run saves its steps again)."""
    checkpoint = Checkpoint.objects.filter(pk=checkpoint_id).select_related("run").first()
    run = checkpoint.run if checkpoint else None
    # A run trained outside the studio (ingested) has its checkpoints on another machine.
    if run is None or run.kind != "train" or run.experiment_id is None or run.source != STUDIO_SOURCE:
        return None
    uses = TrainingSuite.objects.filter(experiment_id=run.experiment_id).select_related("suite", "suite__team").first()
    if uses is None:
        return None
    ordinal = Checkpoint.objects.filter(run=run, step__lte=checkpoint.step).values("step").distinct().count()
    if ordinal % uses.every_n_checkpoints or SuiteRun.objects.filter(source_run=run, source_step=checkpoint.step):
        return None
    try:
        return services.launch(uses.suite, run.created_by, checkpoint_ids=[checkpoint.pk],
                               name=f"{uses.suite.name} on {run.name} @ step {checkpoint.step}", source_run=run,
                               source_step=checkpoint.step)  # fmt: skip
    except FieldErrors as exc:
        message = f"suite {uses.suite.name!r} was not run on the checkpoint of step {checkpoint.step}: {exc}"
    except Exception as exc:  # noqa: BLE001 - whatever it was, the training goes on; it is said on the run
        log.exception("suite launch for checkpoint %s failed", checkpoint_id)
        message = f"suite {uses.suite.name!r} could not start on step {checkpoint.step}: {type(exc).__name__}: {exc}"
    events.record(run.pk, [("warning", checkpoint.step, {"message": message})])
    return None
