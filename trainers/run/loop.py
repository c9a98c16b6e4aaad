"""The GRPO-family training loop: `train(spec, reporter, should_stop) -> RunResult`.

`Trainer` is what a run is: fit, step, checkpoint, validation, reporting. Each stage of a step is a part
with one job and its own state, and `Trainer.step` reads as the algorithm, one stage a line:

    1-3  collect scored groups: sample prompts, generate a group of episodes per prompt (one turn each,
         or turn by turn in an environment), score them with the rubric; dynamic sampling, hints,
         curriculum feedback (`trainers.run.collection.GroupCollector`, synchronous or asynchronous)
    4-8  the policy update: the step's batch, old / reference logprobs, the sampler's gap and its
         correction, token rewards, advantages, ppo_epochs x micro-batched passes, the optimiser step
         (`trainers.update.policy_update.PolicyUpdate`)
    then the schedule moves on, the sampler gets the new weights (`trainers.run.sampler.SamplerSync`),
    and the step's metrics are put together (`trainers.run.step_metrics`) -> metrics + rollouts to the
    reporter -> validation and a checkpoint when due.

Every choice between methods is a registry lookup by the name in the spec (`trainers.algorithms`),
never an if-chain here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from trainers.curriculum.hints import Hinter
from trainers.curriculum.state import Curriculum
from trainers.models.loading import (
    Reference,
    default_device,
    enable_activation_checkpointing,
    load_policy,
    load_reference,
)
from trainers.report import NullReporter, Reporter, Rollout, RunResult, failure_reported
from trainers.rewards.rubric import Rubric
from trainers.rollout.engines.base import RolloutEngine
from trainers.rollout.engines.catalog import create_engine
from trainers.rollout.environments.packages.prepare import prepared
from trainers.rollout.progress import GenerationProgress
from trainers.run import checkpoint, sft, validation
from trainers.run.checkpoint import CheckpointSchedule, save_checkpoint
from trainers.run.collection import GroupCollector, training_prompts
from trainers.run.failure_watch import FailureWatch
from trainers.run.learning_watch import LearningWatch
from trainers.run.records import step_rollouts
from trainers.run.sampler import SamplerSync, sampling_copy, sampling_params
from trainers.run.seeding import seed_everything
from trainers.run.startup import Startup
from trainers.run.step_metrics import the_step_metrics
from trainers.run.stopping import StepStart, StepStopped, StopWatch
from trainers.run.tool_silence import ToolSilence
from trainers.scale.distributed import (
    any_process,
    broadcast_parameters,
    cleanup,
    device_for,
    dist_info,
    gathered_lists,
    init_distributed,
    mean_over_processes,
    shard,
)
from trainers.scale.sharding import build_mesh
from trainers.spec import RunSpec
from trainers.update.batches import TokenBatch
from trainers.update.groups import Group
from trainers.update.guidance import guidance_batch
from trainers.update.lockstep import Lockstep
from trainers.update.logprobs import chunk_tokens_for
from trainers.update.micro_batching import MicroBatching
from trainers.update.optimizer import advance_schedule, make_optimizer, make_scheduler
from trainers.update.policy_update import PolicyUpdate
from trainers.update.teachers import Teachers


@dataclass
class StepRecord:
    """What one step did: its metrics, every group it generated (the step's rollouts), and which of them
    it trained on (by id)."""

    metrics: dict[str, float]
    generated: list[Group]
    trained: set[int]


def train(spec: RunSpec, reporter: Reporter, should_stop: Callable[[], bool | str] = lambda: False) -> RunResult:
    """Run `spec` to the end (or until `should_stop()`, within a token for a run of one process: see `fit`),
    reporting as it goes.

    A `warm_up` section first fine-tunes the model on its conversations (`sft.warmed`), then RL starts.
    Reports status "running", then "succeeded" / "cancelled"; on an error, logs the traceback,
    reports "failed" with the message, and re-raises so the caller sees the exception.
    Over several processes (`parallel.procs_per_node` x `parallel.nodes`) rank 0 alone reports."""
    if not dist_info().is_main:
        reporter = NullReporter()
    reporter.status("running", spec.name)
    trainer = None
    try:
        with failure_reported(reporter):
            # A verifiers environment: installed (its own virtual environment), its tasks and reward functions
            # made the run's prompts and criteria (trainers.rollout.environments.packages.prepare).
            spec = prepared(spec, reporter.log)
            spec = sft.warmed(spec, reporter)  # the cold start (spec.warm_up), if any: RL starts from its model
            trainer = Trainer(spec, reporter)
            return trainer.fit(should_stop)
    finally:
        if trainer is not None:
            trainer.close()


class Trainer:
    """A run: its model, optimiser, engine, rubric and data position, and the parts a step is made of."""

    def __init__(self, spec: RunSpec, reporter: Reporter) -> None:
        self.spec = spec
        self.reporter = reporter
        self.step_count = 0
        self.dist = init_distributed()  # a single process unless launched by torchrun
        # The device mesh the model is sharded on (None alone); refuses a job launched with another
        # process count than spec.parallel asks for, before anything loads.
        self.mesh = build_mesh(spec.parallel, self.dist)
        # Prompts this process generates for per step: its share of prompts_per_step (all of it alone).
        self.local_prompts = len(shard(range(spec.optim.prompts_per_step), self.dist))
        seed_everything(spec.optim.seed)
        resume_dir = checkpoint.resolve_resume(spec.checkpoint) if spec.checkpoint.resume_from else None

        self.device = device_for(self.dist) if self.dist.enabled else default_device()
        self.startup = Startup(spec, reporter, resumed=resume_dir is not None)  # the log says each part
        self.startup.model()
        # A sharded checkpoint's weights load in load_trainer_state (below), into the model as this run holds it.
        self.model, self.tokenizer = load_policy(
            spec.model, self.device, checkpoint=checkpoint.initial_weights(resume_dir)
        )
        chunk_tokens = chunk_tokens_for(self.model, spec.optim.logprob_chunk_mib)  # per LM-head chunk
        if self.dist.enabled:
            broadcast_parameters(self.model, self.dist)  # e.g. fresh LoRA adapters: rank 0's everywhere
            torch.manual_seed(spec.optim.seed + self.dist.rank)  # each process samples its own completions
        if spec.parallel.activation_checkpointing and not spec.model.gradient_checkpointing:
            enable_activation_checkpointing(self.model)  # per decoder layer, before sharding; alone too
        self.reference: Reference | None = load_reference(
            spec.model, self.model, spec.algorithm.kl_beta, policy_is_initial=resume_dir is None
        )
        # parallel.mixed_precision under FSDP is FSDP's (bf16 parameters in the passes, float32 master
        # weights and gradient reduction); a single process is not sharded and gets the same from autocast.
        alone_bf16 = self.mesh is None and spec.parallel.mixed_precision == "bf16"
        precision = "bfloat16" if alone_bf16 else spec.optim.precision
        self.sampler = SamplerSync(
            self.model, sampling_copy(spec, self.model, self.reference, self.mesh),
            asynchronous=spec.rollout.asynchronous.runs_ahead,
        )  # fmt: skip
        self.startup.engine()
        self.source, held_out = training_prompts(spec, self.tokenizer, lambda cut: reporter.warning(None, cut))
        self.validator = validation.Validator(spec, held_out) if spec.validation is not None else None
        self.curriculum = Curriculum(spec, self.source)
        self.rubric = Rubric.from_spec(spec.rubric)
        self.engine: RolloutEngine = create_engine(spec, model=self.sampler.sampling_model, tokenizer=self.tokenizer)
        self.optimizer = make_optimizer(self.model, spec.optim)
        self.scheduler = make_scheduler(self.optimizer, spec.optim)
        self.lockstep = Lockstep(
            sharded=self.mesh is not None, dist=self.dist, device=self.device, pad_id=self.tokenizer.pad_token_id,
            precision=precision, chunk_tokens=chunk_tokens, pack_tokens=MicroBatching.of(spec.optim).pack_tokens,
        )  # fmt: skip
        self.teachers = Teachers.from_spec(spec, self.tokenizer, self.lockstep)  # refused in words if they cannot teach
        self.update = PolicyUpdate(spec, self.model, self.reference, self.optimizer, dist=self.dist,
                                   lockstep=self.lockstep, teachers=self.teachers)  # fmt: skip
        self.last_checkpoint: str | None = None
        self.mid_step: Callable[[], None] | None = None  # while fit runs alone: raises StepStopped on a stop
        self.validation_pending = False  # the current step's validation is due and not yet reported
        self.checkpoints = CheckpointSchedule(spec.checkpoint, self.dist, self.device)  # its clock starts now
        self.failures = FailureWatch(spec.reward.failure_warn_share, spec.reward.stop_after_failing_steps)
        self.tool_silence = ToolSilence(spec)
        self.learning_watch = LearningWatch(spec)
        self.hinter = Hinter.from_spec(spec.curriculum, self.tokenizer) if spec.curriculum.hints else None
        self.collector = GroupCollector(
            spec, dist=self.dist, device=self.device, local_prompts=self.local_prompts, engine=self.engine,
            tokenizer=self.tokenizer, rubric=self.rubric, curriculum=self.curriculum, source=self.source,
            hinter=self.hinter, sampling=sampling_params(spec), sampling_model=self.sampler.sampling_model,
            steps_done=lambda: self.step_count,
        )  # fmt: skip
        # How far a sampling is (a step's, a validation's), in the log at most every few seconds (issue 39).
        progress = GenerationProgress(reporter.log)
        self.engine.completed, self.engine.decoding, self.collector.progress = progress.add, progress.decoding, progress
        if self.validator is not None:
            self.validator.progress = progress
        if resume_dir is not None:
            checkpoint.load_trainer_state(self, resume_dir)
            # A sharded checkpoint's weights were loaded into the sharded model just now: the
            # engine (or its whole copy) still holds the weights the model started from.
            self._sync_sampler()
            reporter.log(f"resumed from {resume_dir} at step {self.step_count}")

    # ------------------------------------------------------------------ the run

    def fit(self, should_stop: Callable[[], bool | str]) -> RunResult:
        """Steps until total_steps or until `should_stop()` says so: between steps, and for a run of one
        process sampling synchronously also between sampled tokens (trainers.run.stopping: the step is
        dropped). A final checkpoint when `save_final`, and on a stop unless it answered STOP_NOW."""
        spec = self.spec
        metrics: dict[str, float] = {}
        stop = StopWatch(should_stop)
        if not self.dist.enabled and not spec.rollout.asynchronous.runs_ahead:
            self.engine.between_tokens = self.mid_step = stop.check
        stopped = False
        failed: str | None = None
        try:
            # The step-0 baseline (at_start). A resumed run validated its step before the checkpoint it
            # resumed from, unless a stop cut that validation short (`validation_pending`): then it goes first.
            if self.step_count == 0 or self.validation_pending:
                if self.validator is not None and self.validator.due(self.step_count):
                    self.startup.validation(len(self.validator.prompts))
                self._validate()
            if self.step_count < spec.optim.total_steps:
                self.startup.first_step(self.step_count + 1)
            while self.step_count < spec.optim.total_steps and not failed:
                # The cancel reaches one process (rank 0 under the studio); every process must agree to stop,
                # or the others would wait in the step's collectives for a process that has left.
                if any_process(bool(stop()), self.dist, self.device):
                    stopped = True
                    break
                metrics, failed = self._whole_step()
        except StepStopped:  # inside a step (dropped, put back) or its validation
            stopped = True
        finally:
            self.engine.between_tokens = self.mid_step = None
        keep = not any_process(not stop.keep_checkpoint, self.dist, self.device)  # "Stop now" on any: none saves
        return self._end(metrics, failed, stopped, keep)

    def _whole_step(self) -> tuple[dict[str, float], str | None]:
        """One step and what follows it: the watches, its reports, validation and a checkpoint when due;
        returns the step's metrics and why the run fails, if it does. A stop inside the step raises
        StepStopped with the trainer put back as the last whole step left it."""
        spec, reporter = self.spec, self.reporter
        start = StepStart.of(self) if self.mid_step is not None else None
        try:
            record = self.step()
        except StepStopped:
            if start is not None:
                start.restore(self)
            reporter.log(f"stopped during step {self.step_count + 1}: its samples are dropped")
            raise
        metrics = mean_over_processes(record.metrics, self.dist)
        # From the rates averaged over processes, so every process decides the same way.
        failed = self.failures.observe(self.step_count, metrics, self.reporter)
        self.tool_silence.observe(self.step_count, metrics, self.reporter)
        self.learning_watch.observe(self.step_count, record.generated[: self.local_prompts], self.reporter)
        # Rollouts last: reporters may treat them as the end of the step (the worker flushes then).
        reporter.metrics(self.step_count, metrics)
        reporter.log(
            f"step {self.step_count}/{spec.optim.total_steps}: reward {metrics['reward/mean']:.3f}"
            f" loss {metrics.get('actor/loss', float('nan')):.4f} ({metrics['timing/step_s']:.2f}s)"
        )
        with self.collector.data_lock:
            reporter.prompt_stats(self.step_count, self.curriculum.take_events())
        # Every process's rollouts, in rank order: rank 0 reports them all (collective).
        reporter.rollouts(self.step_count, gathered_lists(self.rollouts(record), self.dist))
        if not failed:  # before the checkpoint: a run resumed from it has validated this step
            self._validate()
        if self.checkpoints.due(self.step_count) and not failed:
            self._save()
        return metrics, failed

    def _end(self, metrics: dict[str, float], failed: str | None, stopped: bool, keep: bool) -> RunResult:
        """The run's last checkpoint and status: failed, stopped (`keep`: with a checkpoint) or done."""
        reporter = self.reporter
        if failed:  # the reward meant nothing for several steps: no final checkpoint of that training
            reporter.status("failed", failed)
            return RunResult("failed", self.step_count, metrics, self.last_checkpoint, failed)
        # A stop saves unless told not to ("Stop and save a checkpoint" saves even without save_final).
        save = keep if stopped else self.spec.checkpoint.save_final
        if save and self.step_count > 0 and not self._saved_at_current_step():
            self._save(final=True)
        if not stopped:
            reporter.status("succeeded", f"{self.step_count} steps")
            return RunResult("succeeded", self.step_count, metrics, self.last_checkpoint, f"{self.step_count} steps")
        detail = f"stopped at step {self.step_count}"
        if not keep:
            detail += ": no checkpoint saved, as asked"
        elif self.step_count == 0:
            detail += ": no step had ended, so there is no checkpoint"
        else:
            detail += f": the step-{self.step_count} checkpoint is kept"
        reporter.status("cancelled", detail)
        return RunResult("cancelled", self.step_count, metrics, self.last_checkpoint, detail)

    def step(self) -> StepRecord:
        """One step of the algorithm: 1-3 collect scored groups; 4-8 train on those with a signal; then
        the schedule and the sampler's weights move on."""
        started = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)  # perf/gpu_mem_peak_gb is this step's peak
        found = self.collector.collect(self.step_count)
        if self.mid_step is not None:  # a stop asked for while scoring: before the update, not after it
            self.mid_step()
        procedural = self.collector.adapt_difficulty(found.generated)
        train_groups = found.kept[: self.local_prompts]
        train_started = time.perf_counter()
        guidance, guidance_metrics = self._guidance(found.generated)
        metrics = self._update(train_groups, guidance)
        lr = advance_schedule(self.scheduler)
        self.step_count += 1  # the policy's version: updates applied
        self._sync_sampler()
        metrics = the_step_metrics(self, found, train_groups, metrics, lr=lr, started=started,
                                   train_started=train_started, guidance=guidance_metrics, procedural=procedural)  # fmt: skip
        self.failures.remember_errors(found.generated[: self.local_prompts])
        return StepRecord(metrics, found.generated, {id(grp) for grp in train_groups})

    def _guidance(self, groups: list[Group]) -> tuple[TokenBatch | None, dict[str, float]]:
        """Off-policy guidance's rows of this step (trainers.update.guidance), and `guidance/prompt_frac`."""
        return guidance_batch(
            groups, self.spec.algorithm, self.tokenizer, self.curriculum.passes, pad_id=self.lockstep.pad_id,
            device=self.device,
        )  # fmt: skip

    def _update(self, train_groups: list[Group], guidance: TokenBatch | None) -> dict[str, float]:
        """4-8 on the groups with a signal; with none, this process still joins the others' passes."""
        if train_groups:
            return self.update(train_groups, self.step_count, guidance)
        self.reporter.log(f"step {self.step_count + 1}: every group's rewards agree; no update")
        if self.dist.enabled:  # the others' passes are collective: this process joins each of them
            self.update.join_without_data(self.step_count)
        return {}

    def _sync_sampler(self) -> None:
        """The engine samples from the policy's current weights (version `step_count`) from here on;
        asynchronous, they go in between two of the generator's requests, and the generator stamps the
        version set here on what it samples next."""
        with self.collector.exclusive():
            self.sampler.sync(self.engine)
            self.collector.weights_updated(self.step_count)

    def _validate(self) -> None:
        """Validation after the current step when it is due (trainers.run.validation); the main process
        alone samples it, on its own random stream, and reports it."""
        if self.validator is not None and self.dist.is_main and self.validator.due(self.step_count):
            self.validation_pending = True  # until it has run: a stop inside it leaves it to the resumed run
            with self.collector.exclusive():
                self.validator.run(self.step_count, self.engine, self.rubric, self.tokenizer, self.reporter)
        self.validation_pending = False

    def _save(self, final: bool = False) -> None:
        """Every process writes its shards and its own state (trainers.run.checkpoint); rank 0 reports.
        A final checkpoint is also exported as a transformers folder."""
        with self.collector.exclusive():  # asynchronous: the queue and the groups in flight are not saved
            path = save_checkpoint(self, final=final)
        self.last_checkpoint = str(path)
        self.checkpoints.saved()
        if self.dist.is_main:
            self.reporter.checkpoint(self.step_count, str(path))

    def _saved_at_current_step(self) -> bool:
        return self.last_checkpoint is not None and Path(self.last_checkpoint).name == f"step-{self.step_count}"

    def rollouts(self, record: StepRecord) -> list[Rollout]:
        """This process's groups of the step as Rollouts, numbered over every process's (trainers.run.records).
        Every process must call it."""
        return step_rollouts(record.generated, record.trained, step=self.step_count,
                             multi_turn=self.spec.environment is not None, dist=self.dist)  # fmt: skip

    def close(self) -> None:
        self.collector.close()
        self.engine.close()
        self.rubric.close()
        cleanup(self.dist)
