"""A sweep (an experiment's settings searched by Optuna) and its trials (each an ordinary run)."""

from __future__ import annotations

from django.db import models

from studio.experiments.models import Experiment
from studio.lib.models import TeamObject
from studio.runs.models import Run

GRID, RANDOM, TPE = "grid", "random", "tpe"
SAMPLERS = {GRID: "grid: every combination of the values", RANDOM: "random", TPE: "TPE (Bayesian)"}
NO_PRUNING, MEDIAN, HALVING = "none", "median", "halving"
PRUNERS = {NO_PRUNING: "none", MEDIAN: "median", HALVING: "successive halving (ASHA)"}
MAXIMIZE, MINIMIZE = "maximize", "minimize"
LAST, BEST = "last", "best"
DEFAULT_OBJECTIVE = "val/reward/mean"  # trainers.run.validation: the held-out reward

ACTIVE, FINISHED, STOPPED = "active", "finished", "stopped"
SWEEP_STATES = [(s, s) for s in (ACTIVE, FINISHED, STOPPED)]
# A trial's state, as Optuna's (TrialState) is told it.
T_RUNNING, T_COMPLETE, T_PRUNED, T_FAILED = "running", "complete", "pruned", "failed"
TRIAL_STATES = [(s, s) for s in (T_RUNNING, T_COMPLETE, T_PRUNED, T_FAILED)]


class Sweep(TeamObject):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="sweeps")
    # [{"name": "optim.lr", "kind": "float"|"int"|"choice", "low", "high", "log", "step", "choices"}]:
    # studio.sweeps.space checks them against the experiment's schema.
    parameters = models.JSONField(default=list)
    objective = models.CharField(max_length=200, default=DEFAULT_OBJECTIVE)
    direction = models.CharField(max_length=10, default=MAXIMIZE)
    objective_at = models.CharField(max_length=10, default=LAST)  # the trial's last or best reported value
    sampler = models.CharField(max_length=10, default=TPE)
    pruner = models.CharField(max_length=10, default=NO_PRUNING)
    # Completed trials before the median rule prunes (Optuna's n_startup_trials).
    pruner_startup_trials = models.PositiveIntegerField(default=2)
    seed = models.PositiveIntegerField(default=0)
    max_trials = models.PositiveIntegerField(default=10)
    max_concurrent = models.PositiveIntegerField(default=2)
    max_gpu_hours = models.FloatField(null=True, blank=True)  # None: no limit
    state = models.CharField(max_length=10, choices=SWEEP_STATES, default=ACTIVE)
    ended_because = models.CharField(max_length=300, blank=True)
    study_name = models.CharField(max_length=100, unique=True)  # its study in Optuna's tables
    # One driver at a time (studio.sweeps.driver.claimed): a lease, not a database lock, because Optuna
    # writes through a connection of its own, which a lock held by Django's would block.
    driving_until = models.DateTimeField(null=True, blank=True)
    drive_again = models.BooleanField(default=False)

    class Meta(TeamObject.Meta):
        pass


class Trial(models.Model):
    """One Optuna trial: the values it was given and the run that tried them."""

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="trials")
    number = models.PositiveIntegerField()  # Optuna's trial number
    run = models.OneToOneField(Run, null=True, on_delete=models.SET_NULL, related_name="sweep_trial")
    values = models.JSONField(default=dict)  # {"optim.lr": 0.001, "algorithm.group_size": 4}
    state = models.CharField(max_length=10, choices=TRIAL_STATES, default=T_RUNNING)
    objective = models.FloatField(null=True, blank=True)
    reported_step = models.IntegerField(default=0)  # the last step whose value Optuna was told
    pruned_at_step = models.IntegerField(null=True, blank=True)
    pruned_by = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["sweep", "number"], name="sweep_trial_number")]

    @property
    def pruned_note(self) -> str:
        """What the run page and the trials table say of a pruned trial."""
        if self.pruned_at_step is None:
            return ""
        return f"pruned at step {self.pruned_at_step} by {self.pruned_by}"
