"""Runs and everything they produce.

`RunEvent` is the replayable stream a websocket client resumes from (`seq` per run,
persisted before it is published). `MetricPoint`, `Rollout` and `RolloutScore` are the
same data in shapes that list and filter fast at 100,000 steps / 1,000,000 rollouts:
every listing walks a composite index that starts with `run` and ends with `id`, so
keyset pagination never sorts or counts the whole run.

A rollout references its prompt (`RunPrompt`) instead of copying it: the G samples of a group
and every step that draws the same row share one row, so a 5 MB prompt is stored once per run.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from studio.accounts.models import Team
from studio.experiments.models import Experiment
from studio.runs import episodes

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
STATES = (
    (QUEUED, "Queued"),
    (RUNNING, "Running"),
    (SUCCEEDED, "Succeeded"),
    (FAILED, "Failed"),
    (CANCELLED, "Cancelled"),
)
FINISHED_STATES = (SUCCEEDED, FAILED, CANCELLED)
KINDS = (("train", "Training"), ("eval", "Evaluation"))
EVENT_KINDS = (
    ("metrics", "metrics"),
    ("rollouts", "rollouts"),
    ("status", "status"),
    ("log", "log"),
    ("checkpoint", "checkpoint"),
    ("warning", "warning"),
    ("prompt_stats", "prompt statistics"),  # a step's were written (studio.runs.prompt_stats.event)
)
# Rollout.split: sampled for a training step, or from a held-out prompt after it (trainers.run.validation).
TRAIN_SPLIT, VALIDATION_SPLIT = "train", "validation"
SPLITS = ((TRAIN_SPLIT, "Training"), (VALIDATION_SPLIT, "Validation"))
PREVIEW_CHARS = 200
WARNING_CHARS = 1000
PROMPT_PREVIEW_CHARS = 120
# A prompt's standing, as the trainer's per-prompt statistics judge it (trainers' prompt_stats).
UNSEEN, SOLVED, LEARNABLE, NEVER_SOLVED = "unseen", "solved", "learnable", "never_solved"
PROMPT_STATUSES = (
    (UNSEEN, "Unseen"),
    (SOLVED, "Solved"),
    (LEARNABLE, "Learnable"),
    (NEVER_SOLVED, "Never solved"),
)


class Run(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="runs")
    experiment = models.ForeignKey(Experiment, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    kind = models.CharField(max_length=10, choices=KINDS, default="train")
    name = models.CharField(max_length=200)
    state = models.CharField(max_length=10, choices=STATES, default=QUEUED, db_index=True)
    spec = models.JSONField(help_text="The validated trainers.spec.RunSpec as a dict.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    last_step = models.IntegerField(default=0)
    total_steps = models.IntegerField(default=0)
    celery_task_id = models.CharField(max_length=64, blank=True)
    cancel_requested = models.BooleanField(default=False)
    resumed_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="resumes")
    last_seq = models.BigIntegerField(default=0, help_text="Latest RunEvent.seq of this run.")
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from the worker.")
    worker = models.CharField(max_length=200, blank=True, help_text="Celery worker hostname running it.")
    warning = models.TextField(
        blank=True, help_text="The latest warning the trainer reported (e.g. a criterion failing on most rollouts)."
    )

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["team", "-created"]), models.Index(fields=["state", "heartbeat"])]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def is_finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def can_cancel(self) -> bool:
        return self.state in (QUEUED, RUNNING) and not self.cancel_requested

    def summary(self) -> dict[str, Any]:
        """What the websocket `hello` and list endpoints show about the run."""
        return {
            "id": self.pk,
            "name": self.name,
            "kind": self.kind,
            "state": self.state,
            "error": self.error,
            "warning": self.warning,
            "last_step": self.last_step,
            "total_steps": self.total_steps,
            "cancel_requested": self.cancel_requested,
            "created": self.created.isoformat() if self.created else None,
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
            "team": self.team_id,
            "experiment": self.experiment_id,
        }


class RunEvent(models.Model):
    """One message of the run's replayable stream; `created` is epoch seconds (the wire's `time`)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.BigIntegerField()
    kind = models.CharField(max_length=12, choices=EVENT_KINDS)
    step = models.IntegerField(null=True, blank=True)
    payload = models.JSONField()
    created = models.FloatField()

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="one_event_per_run_seq")]

    def to_message(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "step": self.step, "time": self.created, "data": self.payload}


class MetricPoint(models.Model):
    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metric_points")
    step = models.IntegerField()
    key = models.CharField(max_length=200)
    value = models.FloatField()
    wall_time = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["run", "key", "step"])]


class RunPrompt(models.Model):
    """One distinct prompt of a run, stored once and referenced by every rollout of it.

    Unique per (run, content digest), not per (run, prompt_id): the trainer's prompt_id names a
    group within a step ("row@1" for a row drawn twice), so one text has several ids, and only
    the content says two prompts are the same. Kept per run (not shared across runs) so a run's
    rows go with it, and no prompt is visible outside the team that ran it.
    Write through studio.runs.prompts.upsert, which computes digest, chars and preview.
    """

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="prompts")
    digest = models.CharField(max_length=64, help_text="sha256 of the content as canonical JSON.")
    content = models.JSONField(help_text="Text or a list of chat messages.")
    chars = models.IntegerField(help_text="Characters of text in the content (every message's).")
    preview = models.CharField(max_length=PROMPT_PREVIEW_CHARS, blank=True, help_text="Start of the last user message.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "digest"], name="one_prompt_per_run_content")]


class Rollout(models.Model):
    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rollouts")
    step = models.IntegerField()
    prompt_id = models.CharField(max_length=200)
    sample_index = models.IntegerField()
    # Not named `prompt`: its column would be `prompt_id`, which names the group already.
    run_prompt = models.ForeignKey(RunPrompt, on_delete=models.CASCADE, related_name="rollouts")
    completion = models.JSONField(help_text="Text or a list of turns.")
    preview = models.CharField(max_length=PREVIEW_CHARS, blank=True, help_text="First characters of the completion.")
    reward = models.FloatField()
    advantage = models.FloatField(default=0.0)
    num_tokens = models.IntegerField(default=0)
    finish_reason = models.CharField(max_length=20, default="stop")
    scores = models.JSONField(default=dict, help_text="{criterion: {score, explanation, error}}")
    logprobs = models.JSONField(null=True, blank=True)
    trained = models.BooleanField(
        default=True, help_text="False: dynamic sampling dropped its group, or generated it beyond the batch."
    )
    # Multi-turn episodes (studio.runs.episodes): the turns as reported, and columns derived from them
    # once at write time so the inspector's filters read a column, never the JSON.
    turns = models.JSONField(
        null=True, blank=True, help_text="Each turn as trainers.episodes.Turn.to_dict(); null: single turn."
    )
    end_reason = models.CharField(
        max_length=20, blank=True, help_text="done | turn_limit | token_budget | error (multi-turn)."
    )
    num_turns = models.IntegerField(default=1)
    tool_calls = models.IntegerField(default=0)
    tool_errors = models.IntegerField(default=0)
    tools_used = models.CharField(max_length=1000, blank=True, help_text="`,name,name,`: see studio.runs.episodes.")
    ended_at_limit = models.BooleanField(default=False, help_text="end_reason is turn_limit or token_budget.")
    # Hinted retries of prompts whose group all failed (trainers.curriculum.hints).
    hinted = models.BooleanField(default=False, help_text="A hinted retry: its answer began with `hint`.")
    hint = models.TextField(
        blank=True, help_text="The start of the reference solution that opened the answer; never trained on."
    )
    hint_fraction = models.FloatField(null=True, blank=True, help_text="The hint's share of the solution's tokens.")
    split = models.CharField(
        max_length=12, choices=SPLITS, default=TRAIN_SPLIT,
        help_text="train: sampled for a training step; validation: a held-out prompt sampled after the step.",
    )  # fmt: skip

    class Meta:
        indexes = [
            models.Index(fields=["run", "step", "id"]),
            # The inspector's split filter, newest first: validation rollouts are a few steps' worth.
            models.Index(fields=["run", "split", "step", "id"]),
            models.Index(fields=["run", "reward", "id"]),
            models.Index(fields=["run", "num_tokens", "id"]),  # the inspector's sort by length
            models.Index(fields=["run", "advantage", "id"]),  # and by advantage
            models.Index(fields=["run", "finish_reason", "step", "id"]),
            models.Index(fields=["run", "step", "prompt_id"]),
        ]

    def summary(self) -> dict[str, Any]:
        """The compact form carried by websocket `rollouts` events and list endpoints.

        Reads self.run_prompt's preview: one query per rollout unless it was loaded with
        select_related("run_prompt") (defer "run_prompt__content": the preview is all it needs)."""
        return {
            "id": self.pk,
            "step": self.step,
            "prompt_id": self.prompt_id,
            "prompt_preview": self.run_prompt.preview,
            "sample_index": self.sample_index,
            "reward": self.reward,
            "advantage": self.advantage,
            "num_tokens": self.num_tokens,
            "finish_reason": self.finish_reason,
            "trained": self.trained,
            "scores": {name: s.get("score") for name, s in self.scores.items()},
            "preview": self.preview,
            "num_turns": self.num_turns,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "tools_used": episodes.unpack_tools(self.tools_used),
            "ended_at_limit": self.ended_at_limit,
            "end_reason": self.end_reason,
            "hinted": self.hinted,
            "hint_fraction": self.hint_fraction,
            "split": self.split,
        }


class RolloutScore(models.Model):
    """One criterion's score of one rollout: a side table so `criterion=x&score_min=` filters walk an index."""

    id = models.BigAutoField(primary_key=True)
    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="criterion_scores")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    criterion = models.CharField(max_length=64)
    score = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["run", "criterion", "score"])]


class PromptStat(models.Model):
    """What the trainer knows about one dataset row of a run: times drawn, its Beta posterior of
    the pass rate, and each step's outcome (`history`). Upserted per step by
    studio.runs.prompt_stats.record; a resumed run starts with its source's rows (inherit).

    `prompt_id` is the row's id, never "id@2": a row drawn twice in a step is one entry here.
    The prompts view sorts by pass rate, uncertainty, draws and last step: one (run, field, id)
    index each, for keyset pages as the rollout list has.
    """

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="prompt_stats")
    prompt_id = models.CharField(max_length=200)
    draws = models.IntegerField(default=0, help_text="Times the row was drawn (twice in one step counts 2).")
    alpha = models.FloatField(help_text="Beta posterior of the pass rate: 1 + passes, as the trainer counts them.")
    beta = models.FloatField(help_text="Beta posterior of the pass rate: 1 + failures, as the trainer counts them.")
    pass_rate = models.FloatField(help_text="The trainer's estimate of the row's pass rate.")
    pass_rate_std = models.FloatField(help_text="Its uncertainty (posterior standard deviation).")
    last_step = models.IntegerField(help_text="The last step that drew the row.")
    status = models.CharField(max_length=12, choices=PROMPT_STATUSES, default=UNSEEN)
    history = models.JSONField(default=list, help_text="[[step, passed, samples], ...], oldest first.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "prompt_id"], name="one_stat_per_run_prompt")]
        indexes = [
            models.Index(fields=["run", "pass_rate", "id"]),
            models.Index(fields=["run", "pass_rate_std", "id"]),
            models.Index(fields=["run", "draws", "id"]),
            models.Index(fields=["run", "last_step", "id"]),
            models.Index(fields=["run", "status"]),  # the view's counts per status
        ]


class Checkpoint(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.IntegerField()
    path = models.CharField(max_length=1000)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "-step"]
