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
from trainers.spec import OptimSpec

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
# Stopped by its infrastructure (a worker shut down, the studio stopped), not by itself: resumable,
# and resumed by itself while the experiment's automatic restarts last (studio.runs.lifecycle).
INTERRUPTED = "interrupted"
STATES = (
    (QUEUED, "Queued"),
    (RUNNING, "Running"),
    (SUCCEEDED, "Succeeded"),
    (FAILED, "Failed"),
    (CANCELLED, "Cancelled"),
    (INTERRUPTED, "Interrupted"),
)
FINISHED_STATES = (SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)
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
# Rollout.split: sampled for a training step, from a held-out prompt after it (trainers.run.validation), or
# by an evaluation run (trainers.run.evaluate: a run of kind "eval", alone or one pair of a suite).
TRAIN_SPLIT, VALIDATION_SPLIT, EVAL_SPLIT = "train", "validation", "eval"
SPLITS = ((TRAIN_SPLIT, "Training"), (VALIDATION_SPLIT, "Validation"), (EVAL_SPLIT, "Evaluation"))
PREVIEW_CHARS = 200
WARNING_CHARS = 1000
PROMPT_PREVIEW_CHARS = 120
# Where a run's rows come from: trained by the studio's own workers, or produced outside it and streamed or
# imported through the ingest API (studio.ingest): a TRL run (rollout_client.trl), a verl dump, any client.
STUDIO_SOURCE = "studio"
SOURCES = ((STUDIO_SOURCE, "Studio"), ("trl", "TRL"), ("verl", "verl"), ("api", "API"))
# What a user may do with a run (studio.runs.lifecycle's services), in the order the pages show them;
# Run.action_refusals is the one rule of when each can work.
# rerun: "Run again exactly", a new run of the same pinned inputs (studio.runs.provenance.rerun_exactly).
RUN_ACTIONS = ("resume", "evaluate", "clone", "rerun", "cancel")
# A criterion that raised on at least this share of a run's rollouts failed its scoring (Run.scoring_failed).
SCORING_FAILED_SHARE = 0.95
# A prompt's standing, as the trainer's per-prompt statistics judge it (trainers' prompt_stats).
UNSEEN, SOLVED, LEARNABLE, NEVER_SOLVED = "unseen", "solved", "learnable", "never_solved"
PROMPT_STATUSES = (
    (UNSEEN, "Unseen"),
    (SOLVED, "Solved"),
    (LEARNABLE, "Learnable"),
    (NEVER_SOLVED, "Never solved"),
)

# What a run trains to when its settings leave optim.total_steps unset (a resume of it stops there).
DEFAULT_TOTAL_STEPS: int = OptimSpec.model_fields["total_steps"].default


class Run(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="runs")
    experiment = models.ForeignKey(Experiment, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    kind = models.CharField(max_length=10, choices=KINDS, default="train")
    name = models.CharField(max_length=200)
    state = models.CharField(max_length=12, choices=STATES, default=QUEUED, db_index=True)
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
    stop_saves_checkpoint = models.BooleanField(
        default=True, help_text="A stop asked for saves the last whole step's checkpoint first (False: Stop now)."
    )
    interrupt_requested = models.BooleanField(
        default=False, help_text="Its worker is shutting down: checkpoint at the next step and end interrupted."
    )
    restarts = models.IntegerField(
        default=0, help_text="Automatic restarts so far (RunRestart); also names the attempt a worker runs."
    )
    resumed_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="resumes")
    resumed_at_step = models.IntegerField(
        null=True, blank=True, help_text="The step of resumed_from's checkpoint it went on from (lifecycle.resume)."
    )
    last_seq = models.BigIntegerField(default=0, help_text="Latest RunEvent.seq of this run.")
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from the worker.")
    worker = models.CharField(max_length=200, blank=True, help_text="Celery worker hostname running it.")
    placement = models.CharField(
        max_length=200, blank=True, help_text="Where it runs: its processes and GPUs (studio.runs.placement.describe)."
    )
    waiting_for = models.CharField(
        max_length=500, blank=True, help_text="What a queued run waits for (free GPUs); empty once it starts."
    )
    warning = models.TextField(
        blank=True, help_text="The warnings of the latest step that had any, one per line (e.g. a criterion "
        "failing on most rollouts; groups without a reward difference)."
    )
    warning_step = models.IntegerField(
        null=True, blank=True, help_text="The step of the warnings shown; empty: before the first step, or none."
    )
    scoring = models.JSONField(
        default=dict, blank=True,
        help_text="Criterion errors tallied when it ended (studio.runs.scoring): {rollouts, failed: {criterion: n}}.",
    )  # fmt: skip
    provenance = models.JSONField(
        default=dict, blank=True,
        help_text="What produced it, recorded by the worker when it started (workers.provenance): the data's content "
        "digests and snapshots, rubric and environment versions, code commit, packages, seeds, device, machine.",
    )  # fmt: skip
    repeat_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="repeats",
        help_text="The run it runs again exactly (studio.runs.provenance.rerun_exactly), with that run's pinned inputs.",
    )  # fmt: skip
    source = models.CharField(
        max_length=10, choices=SOURCES, default=STUDIO_SOURCE,
        help_text="studio: trained by the studio's workers; trl, verl, api: trained elsewhere and ingested (studio.ingest).",
    )  # fmt: skip
    # What it used (studio.runs.usage), written by its worker as it runs and final when it ends: sums over its
    # attempts (a restart is a new attempt; each attempt's share is kept in `usage` and counted once).
    device_seconds = models.FloatField(
        default=0.0, help_text="Wall time of its processes on their devices (GPU or CPU), summed over processes."
    )
    gpu_seconds = models.FloatField(default=0.0, help_text="The GPU part of device_seconds (0 for a CPU run).")
    tokens_generated = models.BigIntegerField(default=0, help_text="Completion tokens its rollouts sampled.")
    tokens_trained = models.BigIntegerField(default=0, help_text="Completion tokens its updates trained on.")
    usage = models.JSONField(
        default=dict, blank=True,
        help_text="Per attempt and per process (studio.runs.usage.record): {attempts: {n: {processes: [{rank, device, "
        "seconds}], device_seconds, gpu_seconds, tokens_generated, tokens_trained, final}}}.",
    )  # fmt: skip

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["team", "-created"]), models.Index(fields=["state", "heartbeat"])]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def is_finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def is_external(self) -> bool:
        """Trained outside the studio (its rows came through the ingest API): no worker of the studio runs it."""
        return self.source != STUDIO_SOURCE

    @property
    def can_cancel(self) -> bool:
        return self.state in (QUEUED, RUNNING) and not self.cancel_requested

    def action_refusals(self) -> dict[str, str]:
        """{action: why it cannot work on the run now, "" where it can}, for each of RUN_ACTIONS: the one
        rule the run page, the runs lists and the API offer actions by, and the services (studio.runs.
        lifecycle) refuse by. Whether a user may act at all is their role's (editors and owners).

        resume: a finished training run with a checkpoint of its own, or the one it resumed from, that is
        not at the last step of its settings (a resume trains up to the settings' optim.total_steps: from
        there it would train nothing); evaluate: a run with a checkpoint; clone: a run whose experiment
        still exists (it holds the dataset and rubric the settings name); rerun (Run again exactly): a run
        whose worker recorded its provenance (its pinned inputs); cancel (Stop): queued or running, and not
        already asked. A run trained outside the studio (`is_external`) can only be stopped: it ends at
        once, and its trainer's next report is refused (studio.ingest). Reads the run's newest checkpoint
        step (one query, unless `with_action_facts` annotated it)."""
        newest = self.newest_checkpoint_step
        has_checkpoint = newest is not None
        started_from = (self.spec.get("checkpoint") or {}).get("resume_from") if isinstance(self.spec, dict) else None
        resume = ""
        if self.kind != "train":
            resume = "only training runs can be resumed"
        elif self.state in (QUEUED, RUNNING):
            resume = f"run is {self.state}; cancel it or wait for it to end before resuming"
        elif not has_checkpoint and (not started_from or started_from == "latest"):
            resume = "run has no checkpoint to resume from"
        elif has_checkpoint and newest >= self.planned_steps:
            resume = (f"its newest checkpoint is the last step of its settings ({newest} of {self.planned_steps}): "
                      "a resume would train nothing; clone it with more steps to train longer")  # fmt: skip
        cancel = ""
        if self.state not in (QUEUED, RUNNING):
            cancel = f"run is {self.state}; only queued or running runs can be cancelled"
        elif self.cancel_requested:
            cancel = "a stop was already asked for: the run is stopping"
        rerun = "" if self.provenance else (
            "the run recorded no provenance (it never started on a worker, or ran before runs recorded it), so "
            "there are no pinned inputs to run again: clone it instead"
        )  # fmt: skip
        refusals = {
            "resume": resume,
            "evaluate": "" if has_checkpoint else "run has no checkpoint to evaluate",
            "clone": "" if self.experiment_id else (
                "its experiment was deleted (with the dataset and rubric its settings name): launch from an experiment"
            ),
            "rerun": rerun,
            "cancel": cancel,
        }  # fmt: skip
        if self.is_external:  # its settings are another trainer's: the studio cannot launch them again
            elsewhere = (
                f"run was trained outside the studio ({self.get_source_display()}); its settings cannot launch here"
            )
            refusals.update(resume=elsewhere, evaluate=elsewhere, clone=elsewhere)
        return refusals

    def actions(self) -> list[str]:
        """The actions that can work on the run now (action_refusals), in RUN_ACTIONS order."""
        return [name for name, why in self.action_refusals().items() if not why]

    @property
    def has_checkpoint(self) -> bool:
        return self.newest_checkpoint_step is not None

    @property
    def newest_checkpoint_step(self) -> int | None:
        """The step of the run's newest checkpoint, None without one (annotated by with_action_facts and
        the runs tables, else one query)."""
        if hasattr(self, "checkpoint_step"):
            return self.checkpoint_step
        return self.checkpoints.aggregate(step=models.Max("step"))["step"]

    @property
    def planned_steps(self) -> int:
        """The steps its settings train to (optim.total_steps, the schema's default when unset): where a
        resume of it would stop."""
        optim = self.spec.get("optim") if isinstance(self.spec, dict) else None
        steps = (optim or {}).get("total_steps")
        return steps if isinstance(steps, int) and not isinstance(steps, bool) else DEFAULT_TOTAL_STEPS

    @property
    def warnings(self) -> list[str]:
        """The warnings shown, one a line (studio.runs.reports.banner)."""
        return [line for line in self.warning.splitlines() if line.strip()]

    @property
    def scoring_failed(self) -> list[dict[str, Any]]:
        """The criteria that raised (errored, timed out, were not run) on at least SCORING_FAILED_SHARE of
        the run's rollouts, as tallied when it ended: [{criterion, failed, rollouts}]. A failed criterion
        scores 0, so with these the reward says little however the run ended; empty before it ends."""
        tally = self.scoring if isinstance(self.scoring, dict) else {}
        total = int(tally.get("rollouts") or 0)
        failed = tally.get("failed") or {}
        return [
            {"criterion": name, "failed": int(n), "rollouts": total}
            for name, n in sorted(failed.items())  # by name: PostgreSQL's jsonb keeps no insertion order
            if total and int(n) >= SCORING_FAILED_SHARE * total
        ]

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
            "restarts": self.restarts,
            "placement": self.placement,
            "waiting_for": self.waiting_for,
            "created": self.created.isoformat() if self.created else None,
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
            "team": self.team_id,
            "experiment": self.experiment_id,
            "resumed_from": self.resumed_from_id,
            "actions": self.actions(),  # what can work now; the page offers them to editors only
            "scoring_failed": self.scoring_failed,
            "source": self.source,
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
        help_text="train: sampled for a training step; validation: a held-out prompt sampled after the step; "
        "eval: sampled by an evaluation run.",
    )  # fmt: skip
    # Asynchronous runs (trainers.run.pipeline): which policy versions sampled the completion and how stale
    # it was when trained on. Columns of their own, not inside `completion`: the inspector reads them without
    # the text, and a staleness filter or sort can have an index later.
    policy_versions = models.JSONField(
        null=True, blank=True,
        help_text="[[version, tokens], ...] in token order (several with partial rollouts); null: not recorded.",
    )  # fmt: skip
    staleness = models.IntegerField(
        null=True, blank=True,
        help_text="Versions between its oldest token's policy and the weights the step trained from; null: not "
        "recorded (0 in a synchronous run).",
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
            "staleness": self.staleness,
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


class RunRestart(models.Model):
    """One automatic restart of a run whose worker was lost or interrupted (studio.runs.lifecycle.restart):
    when, why, and from which checkpoint step it went on; the steps after that step were done again."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="restart_log")
    number = models.IntegerField(help_text="1 for the first restart.")
    created = models.DateTimeField(auto_now_add=True)
    reason = models.TextField()
    from_step = models.IntegerField(help_text="The checkpoint step it resumed from; 0: from the start.")
    checkpoint = models.CharField(max_length=1000, blank=True, help_text="The folder it resumed from; empty: none.")
    steps_lost = models.IntegerField(default=0, help_text="Steps reported after that checkpoint, done again.")

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="one_restart_per_run_number")]

    def summary(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "at": self.created.isoformat() if self.created else None,
            "reason": self.reason,
            "from_step": self.from_step,
            "checkpoint": self.checkpoint,
            "steps_lost": self.steps_lost,
        }


def with_action_facts(runs: models.QuerySet) -> models.QuerySet:
    """`runs` annotated with what Run.action_refusals reads (each one's newest checkpoint step): a list of
    runs offers their actions without a query per run."""
    newest = Checkpoint.objects.filter(run=models.OuterRef("pk")).order_by("-step").values("step")[:1]
    return runs.annotate(checkpoint_step=models.Subquery(newest))


class RunTag(models.Model):
    """A word a team member put on a run ("baseline", "lr-sweep", "keep") to find it again in the runs table
    (studio.runs.table: shown in its row, filtered on with ?tag=); editors and owners set them (studio.runs.tags)."""

    NAME_MAX = 40

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=NAME_MAX)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="one_tag_name_per_run")]
        indexes = [models.Index(fields=["name", "run"])]  # ?tag=: the runs carrying a tag

    def __str__(self) -> str:
        return self.name
