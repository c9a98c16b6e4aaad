"""Evaluation suites: a team's named list of tasks (Suite), one launch of it on a set of models (SuiteRun),
and one row per (model, task) pair of a launch (SuiteResult).

Each pair is an evaluation run of its own (a Run of kind "eval" whose spec is the pair's RunSpec,
trainers.spec.suite.SuiteSpec.cell_spec): its samples are that run's Rollout rows, so the inspector, share
links, notes and the HTML report work on a cell as on any run, and a cell links to its run's inspector.
The suite's job runs every pair (batched per model) and writes each pair's scores here."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from studio.lib.models import TeamObject
from studio.runs.models import CANCELLED, FAILED, INTERRUPTED, QUEUED, RUNNING, SUCCEEDED, Run


class Suite(TeamObject):
    """A named list of tasks. `tasks` holds, per task, the studio's objects it reads (dataset, rubric,
    environment ids, or a procedural task) and its settings (studio.evaluations.suite_tasks validates it)."""

    tasks = models.JSONField(default=list, help_text="[{name, dataset | procedural, rubric, environment, k, ...}]")
    rollout = models.JSONField(
        default=dict, blank=True, help_text="trainers.spec.RolloutSpec values: engine, sampling."
    )
    seed = models.PositiveIntegerField(default=0, help_text="Every (model, task) pair samples from this seed.")


class SuiteRun(models.Model):
    """One launch of a suite on a list of models: its resolved settings (a trainers.spec.suite.SuiteSpec)."""

    suite = models.ForeignKey(Suite, null=True, on_delete=models.SET_NULL, related_name="suite_runs")
    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="suite_runs")
    name = models.CharField(max_length=200)
    spec = models.JSONField(help_text="The validated trainers.spec.suite.SuiteSpec as a dict.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    celery_task_id = models.CharField(max_length=64, blank=True)
    # A suite run on a training run's checkpoint while it trains: its scores also become that run's curves.
    source_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="suite_runs")
    source_step = models.IntegerField(null=True, blank=True, help_text="The checkpoint step it scored.")

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return self.name

    @property
    def state(self) -> str:
        """From its pairs' runs: queued until one starts, running while any runs, then failed if any failed,
        cancelled if any was, else succeeded. One query unless the results are prefetched."""
        states = {r.run.state for r in self.results.all()}
        if not states or states == {QUEUED}:
            return QUEUED
        if states & {QUEUED, RUNNING, INTERRUPTED}:  # interrupted: it goes back to the queue
            return RUNNING
        for final in (FAILED, CANCELLED):
            if final in states:
                return final
        return SUCCEEDED


class SuiteResult(models.Model):
    """One (model, task) pair of a suite run: the evaluation run that samples it, and its scores once done
    (mean over prompts with a bootstrap interval; null until scored)."""

    suite_run = models.ForeignKey(SuiteRun, on_delete=models.CASCADE, related_name="results")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="suite_result")
    model_index = models.PositiveIntegerField(help_text="The model's place in the suite run (table row).")
    model_label = models.CharField(max_length=120)
    checkpoint = models.CharField(max_length=1000, blank=True, help_text="Checkpoint folder; empty: a base model.")
    step = models.IntegerField(null=True, blank=True, help_text="The checkpoint's training step, if known.")
    source_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                   help_text="The run that wrote the checkpoint.")  # fmt: skip
    task_index = models.PositiveIntegerField(help_text="The task's place in the suite (table column).")
    task = models.CharField(max_length=64)
    num_prompts = models.IntegerField(null=True, blank=True)
    k = models.IntegerField()
    reward_mean = models.FloatField(null=True, blank=True)
    reward_mean_low = models.FloatField(null=True, blank=True)
    reward_mean_high = models.FloatField(null=True, blank=True)
    pass_at_1 = models.FloatField(null=True, blank=True)
    pass_at_1_low = models.FloatField(null=True, blank=True)
    pass_at_1_high = models.FloatField(null=True, blank=True)
    pass_at_k = models.FloatField(null=True, blank=True)
    pass_at_k_low = models.FloatField(null=True, blank=True)
    pass_at_k_high = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["model_index", "task_index"]
        constraints = [
            models.UniqueConstraint(fields=["suite_run", "model_index", "task_index"], name="one_result_per_pair")
        ]

    @property
    def is_base(self) -> bool:
        return not self.checkpoint


class TrainingSuite(models.Model):
    """An experiment's suite while it trains: every `every_n_checkpoints`-th checkpoint a run of the experiment
    saves is scored by the suite (a suite run of its own, on a worker place of its own, never blocking the
    training), and the scores become the run's curves `suite/<task>/...` at the checkpoint's step."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="training_suites")
    experiment = models.OneToOneField("experiments.Experiment", on_delete=models.CASCADE, related_name="training_suite")
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="training_uses")
    every_n_checkpoints = models.PositiveIntegerField(default=1, help_text="Score every Nth checkpoint (1: each).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(every_n_checkpoints__gte=1), name="every_n_at_least_1")
        ]
