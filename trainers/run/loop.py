"""The GRPO-family training loop: `train(spec, reporter, should_stop) -> RunResult`.

One step, in the order of the algorithm (`Trainer.step`):

    sample prompts -> generate a group of episodes per prompt (one turn each, or turn by turn in
    an environment) -> score the episodes with the rubric
    -> (DAPO) soft overlong penalty, drop groups whose rewards all agree and draw more
    -> old / reference logprobs -> token rewards -> advantages
    -> ppo_epochs x (micro-batches: policy loss + KL term - entropy bonus, accumulated)
       -> clip grad -> optimiser step -> scheduler step
    -> metrics + rollouts to the reporter -> checkpoint every N steps

Every choice between methods is a registry lookup by the name in the spec
(`trainers.algorithms`), never an if-chain here.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from trainers.algorithms.advantages import ADVANTAGES
from trainers.algorithms.aggregation import accumulation_weight, aggregate_loss, aggregation_units
from trainers.algorithms.filters import groups_with_reward_spread, overlong_loss_mask, overlong_soft_penalty
from trainers.algorithms.guidance import guidance_token_loss, loss_share
from trainers.algorithms.info_gain import apply_info_gain
from trainers.algorithms.kl import kl_penalty
from trainers.algorithms.masked import masked_mean, masked_sum
from trainers.algorithms.mismatch import OFF_POLICY_CORRECTIONS, logprob_gap
from trainers.algorithms.policy_losses import POLICY_LOSSES
from trainers.algorithms.sample_weights import signed_advantage_weights
from trainers.algorithms.token_rewards import token_level_rewards
from trainers.algorithms.token_selection import TokenSelection
from trainers.algorithms.turns import TurnLayout, credit_modes
from trainers.curriculum.budgets import Allocation
from trainers.curriculum.hints import Hinter
from trainers.curriculum.state import Curriculum
from trainers.data.procedural.source import ProceduralSource
from trainers.data.prompts import Prompt, load_prompts, render_prompt
from trainers.data.source import PromptSource
from trainers.episodes import Episode
from trainers.models.loading import (
    Reference,
    default_device,
    enable_activation_checkpointing,
    load_policy,
    load_reference,
    trainable_parameters,
)
from trainers.report import NullReporter, Reporter, Rollout, RunResult, failure_reported
from trainers.rewards.rubric import Rubric
from trainers.rollout.engines.base import RolloutEngine, SamplingParams
from trainers.rollout.engines.catalog import create_engine, engine_class
from trainers.rollout.engines.vllm_weights import export_weights
from trainers.rollout.environments.tool_calls import well_formed
from trainers.rollout.generate import ScoredGroup, generate_and_score, score_groups
from trainers.run import checkpoint, sft, validation
from trainers.run.checkpoint import save_checkpoint
from trainers.run.guidance import guidance_rows
from trainers.run.pipeline import Pipeline, Taken, async_metrics
from trainers.run.records import episode_rollout
from trainers.run.seeding import seed_everything
from trainers.run.selection import PassTokens, Selected, StepSelector
from trainers.run.tool_silence import ToolSilence
from trainers.scale.distributed import (
    any_process,
    broadcast_parameters,
    cleanup,
    device_for,
    dist_info,
    gathered_lists,
    init_distributed,
    max_over_processes,
    mean_over_processes,
    shard,
    sum_over_processes,
)
from trainers.scale.sharding import build_mesh, copy_weights_into, full_copy, full_tensor, shard_model
from trainers.spec import DataSpec, RunSpec
from trainers.update.batches import TokenBatch
from trainers.update.logprobs import batched_logprobs, chunk_tokens_for, token_logprobs
from trainers.update.micro_batching import MicroBatching
from trainers.update.precision import autocast


@dataclass
class Group(ScoredGroup):
    """A scored group as training uses it: shaped rewards, advantages, whether it carries a signal."""

    rewards: list[float]  # the outcome: rubric reward (+ soft overlong penalty); turn rewards not included
    advantages: list[float] = field(default_factory=list)  # sequence-level, set when trained on

    has_spread: bool = True  # the episodes' rewards are not all equal (else they carry no signal)

    @property
    def totals(self) -> list[float]:
        """Each episode's reward as reported: the outcome plus the environment's turn rewards."""
        return [r + sum(t.reward for t in ep.turns) for r, ep in zip(self.rewards, self.episodes, strict=True)]


@dataclass
class StepBatch:
    """The sequences a step trains on, as tensors: (B, T) over completion tokens, B = every
    sample of every trained group."""

    tokens: TokenBatch  # its completion mask covers sampled and observation tokens (all attended to)
    trained: torch.Tensor  # (B, T) 1 on sampled tokens only: observation tokens are never trained on
    loss_mask: torch.Tensor  # `trained`, less truncated episodes under the overlong filter and failed ones
    group_index: torch.Tensor  # (B,) which group each sequence belongs to
    rewards: torch.Tensor  # (B,) shaped outcome rewards
    turn_rewards: torch.Tensor  # (B, T) each turn's environment reward on that turn's last sampled token
    turns: TurnLayout
    engine_logp: torch.Tensor | None  # (B, T) the sampler's logprobs, when it reported them

    @property
    def mask(self) -> torch.Tensor:
        return self.trained


def step_group_ids(prompt_ids: list[str]) -> list[str]:
    """One id per group of a step: the prompt's id, with "@k" added to its k-th repeat
    (a small dataset, or dynamic sampling, can draw a prompt twice in one step; each draw is
    its own group with its own advantage baseline, and the inspector shows groups by id)."""
    seen: dict[str, int] = {}
    out = []
    for pid in prompt_ids:
        seen[pid] = seen.get(pid, 0) + 1
        out.append(pid if seen[pid] == 1 else f"{pid}@{seen[pid]}")
    return out


def turn_reward_row(episode: Episode) -> list[float]:
    """Over the episode's completion tokens: each turn's environment reward on that turn's last
    sampled token, 0 elsewhere (a turn that sampled nothing has nowhere to hold its reward)."""
    row: list[float] = []
    for turn in episode.turns:
        sampled = [0.0] * len(turn.token_ids)
        if sampled:
            sampled[-1] = turn.reward
        row += sampled + [0.0] * len(turn.observation_ids)
    return row


def episode_metrics(episodes: list[Episode]) -> dict[str, float]:
    """`episode/*`: turns, tool calls (per tool), tool errors, well-formed calls, answers,
    observation tokens and episodes ended at a limit, each a mean over the episodes."""
    calls = [[c for t in ep.turns for c in t.tool_calls] for ep in episodes]
    flat = [c for episode_calls in calls for c in episode_calls]
    out = {
        "episode/turns_mean": float(np.mean([len(ep.turns) for ep in episodes])),
        "episode/tool_calls_mean": float(np.mean([len(c) for c in calls])),
        "episode/tool_error_rate": float(np.mean([c.error is not None for c in flat])) if flat else 0.0,
        # The share of episodes that called tools and whose every call could be read.
        "episode/well_formed_call_rate": float(np.mean([well_formed(c) for c in calls])),
        "episode/answered_frac": float(np.mean([any(t.answered for t in ep.turns) for ep in episodes])),
        "episode/observation_tokens_mean": float(np.mean([ep.observation_tokens for ep in episodes])),
        "episode/ended_at_limit_frac": float(
            np.mean([ep.end_reason in ("turn_limit", "token_budget") for ep in episodes])
        ),
        "episode/error_frac": float(np.mean([ep.end_reason == "error" for ep in episodes])),
    }
    for tool in sorted({c.name for c in flat if c.name}):
        out[f"episode/tool_calls/{tool}"] = float(np.mean([sum(c.name == tool for c in ep) for ep in calls]))
    return out


def lr_lambda(schedule: str, warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """Multiplier of the peak lr at scheduler step s: linear warm-up, then constant / linear / cosine decay."""

    def factor(s: int) -> float:
        if s < warmup_steps:
            return (s + 1) / (warmup_steps + 1)
        progress = min(1.0, (s - warmup_steps) / max(1, total_steps - warmup_steps))
        if schedule == "linear":
            return 1.0 - progress
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return factor


def advantage_metrics(advantages: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """`advantage/mean|std|min|max` over the valid tokens of a (B, T) advantage matrix."""
    valid = advantages[mask.bool()]
    return {
        "advantage/mean": masked_mean(advantages, mask).item(),
        "advantage/std": valid.std().item() if mask.sum() > 1 else 0.0,
        "advantage/min": valid.min().item(),
        "advantage/max": valid.max().item(),
    }


def prompt_lengths_over(prompts: list[Prompt], tokenizer, data: DataSpec) -> list[int]:
    """Full token lengths of the prompts longer than `data.max_prompt_tokens` (those were cut to it).
    Only prompts at the cap can have been cut, so only those are tokenised again, uncut."""
    cap = data.max_prompt_tokens
    uncut = data.model_copy(update={"max_prompt_tokens": sys.maxsize})  # a copy: no bound check needed
    lengths = (len(render_prompt(p.row, tokenizer, uncut).token_ids) for p in prompts if len(p.token_ids) == cap)
    return [n for n in lengths if n > cap]


def warn_about_cut_prompts(prompts: list[Prompt], tokenizer, data: DataSpec, reporter: Reporter) -> None:
    """A warning when prompts are cut to max_prompt_tokens (their start is dropped, and the model
    never sees it): how many, and the longest, so the setting can be raised or the data fixed."""
    over = prompt_lengths_over(prompts, tokenizer, data)
    if over:
        reporter.warning(None, (
            f"{len(over)} of {len(prompts)} prompts are longer than data.max_prompt_tokens "
            f"({data.max_prompt_tokens}) and are cut to their last {data.max_prompt_tokens} tokens; "
            f"the longest has {max(over)} tokens"
        ))  # fmt: skip


FAILURE_RATE = "reward/criterion_failure_rate/"


class FailureWatch:
    """Criteria that fail (raise, time out, are not run) on most rollouts: a failed criterion
    scores 0, so a run whose scoring fails everywhere would otherwise end "succeeded" with
    reward 0, the cause visible only inside each rollout.

    A criterion whose failure rate on a step is above `warn_share` starts a streak: the first
    step of each streak sends a warning (not every step: one banner, not a flood). After
    `stop_after` steps in a row (0: never) the run stops, failed, naming the criterion and
    its last error."""

    def __init__(self, warn_share: float, stop_after: int) -> None:
        self.warn_share = warn_share
        self.stop_after = stop_after
        self.streaks: dict[str, int] = {}
        self.last_errors: dict[str, str] = {}

    def remember_errors(self, groups: list[Group]) -> None:
        """Keep each criterion's latest error text (this process's own rollouts), for the messages."""
        for result in (r for g in groups for r in g.results):
            for name, score in result.scores.items():
                if score.error is not None:
                    self.last_errors[name] = score.error

    def observe(self, step: int, metrics: dict[str, float], reporter: Reporter) -> str | None:
        """Update the streaks from a step's failure rates; warn at a streak's start. Returns why
        the run must stop, or None."""
        for key, rate in metrics.items():
            if not key.startswith(FAILURE_RATE):
                continue
            name = key.removeprefix(FAILURE_RATE)
            self.streaks[name] = self.streaks.get(name, 0) + 1 if rate > self.warn_share else 0
            if self.streaks[name] == 1:
                reporter.warning(step, self._describe(name, f"on {rate:.0%} of step {step}'s rollouts"))
        for name, streak in self.streaks.items():
            if self.stop_after and streak >= self.stop_after:
                return self._describe(
                    name, f"on more than {self.warn_share:.0%} of the rollouts for {streak} steps in a row"
                )
        return None

    def _describe(self, name: str, where: str) -> str:
        last = self.last_errors.get(name, "")
        return (f"criterion {name!r} failed {where} (it scores 0 where it fails, so the reward says little)"
                + (f"; last error: {last}" if last else ""))  # fmt: skip


def train(spec: RunSpec, reporter: Reporter, should_stop: Callable[[], bool] = lambda: False) -> RunResult:
    """Run `spec` to the end (or until `should_stop()`), reporting as it goes.

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
            spec = sft.warmed(spec, reporter)  # the cold start (spec.warm_up), if any: RL starts from its model
            trainer = Trainer(spec, reporter)
            return trainer.fit(should_stop)
    finally:
        if trainer is not None:
            trainer.close()


class Trainer:
    """Everything a run holds between steps: model, optimiser, engine, rubric, data position."""

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
        # A sharded checkpoint's weights load in load_trainer_state (below), into the model as this run holds it.
        self.model, self.tokenizer = load_policy(
            spec.model, self.device, checkpoint=checkpoint.initial_weights(resume_dir)
        )
        self.chunk_tokens = chunk_tokens_for(self.model, spec.optim.logprob_chunk_mib)  # per LM-head chunk
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
        self.precision = "bfloat16" if alone_bf16 else spec.optim.precision
        # Asynchronous rollouts (trainers.run.pipeline) sample from weights of their own, which the trainer
        # refreshes between the generator's requests while it trains on the policy: vLLM holds its own copy
        # already; the transformers engine, which samples from the model object it is given, gets a whole copy.
        self.asynchronous = spec.rollout.asynchronous.runs_ahead
        self.pipeline: Pipeline[Group] | None = None  # started with the first step
        self.pipeline_rubric: Rubric | None = None  # the scorer thread's own (criteria may keep state per thread)
        self.data_lock = threading.RLock()  # the data position and curriculum: the generator draws too
        copy_to_sample = self.asynchronous and engine_class(spec.rollout.engine).samples_from_model
        self.sampling_copy = (
            self._shard() if self.mesh is not None else full_copy(self.model) if copy_to_sample else None
        )
        self.pad_id = self.tokenizer.pad_token_id
        if spec.data.procedural is not None:  # generated prompts at a level the run adapts (RLVE)
            self.source = ProceduralSource(spec.data, self.tokenizer, seed=spec.optim.seed)
            # Validation draws from the task's held-out problems (load_rows of a generated task),
            # which never share a prompt with the training pool.
            held_out = validation.split_prompts(spec, self.tokenizer, load_prompts(spec.data, self.tokenizer))[1]
        else:
            prompts = load_prompts(spec.data, self.tokenizer)
            warn_about_cut_prompts(prompts, self.tokenizer, spec.data, reporter)
            prompts, held_out = validation.split_prompts(spec, self.tokenizer, prompts)  # held-out rows never train
            self.source = PromptSource(prompts, seed=spec.optim.seed, shuffle=spec.data.shuffle)
        self.validator = validation.Validator(spec, held_out) if spec.validation is not None else None
        self.curriculum = Curriculum(spec, self.source)
        self.rubric = Rubric.from_spec(spec.rubric)
        self.engine: RolloutEngine = create_engine(spec, model=self.sampling_model, tokenizer=self.tokenizer)
        self.optimizer = torch.optim.AdamW(
            trainable_parameters(self.model),
            lr=spec.optim.lr,
            betas=(spec.optim.beta1, spec.optim.beta2),
            weight_decay=spec.optim.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(spec.optim.lr_scheduler, spec.optim.warmup_steps, spec.optim.total_steps)
        )
        self.advantage_fn = ADVANTAGES.get(spec.algorithm.advantage_estimator)
        self.policy_loss_fn = POLICY_LOSSES.get(spec.algorithm.policy_loss)
        # Forking tokens, Clip-Cov, KL-Cov: tokens chosen over the whole step (trainers.run.selection).
        self.selector = (
            StepSelector(spec.algorithm, self.dist, self.device, spec.optim.seed)
            if spec.algorithm.selects_tokens
            else None
        )
        self.guidance: TokenBatch | None = None  # the step's reference-solution rows (algorithm.guidance_coef)
        self.guidance_metrics: dict[str, float] = {}
        self.old_entropy: torch.Tensor | None = None  # the old pass's entropy, when forking tokens are selected
        self.last_checkpoint: str | None = None
        self.saved_at = time.monotonic()  # the clock of `every_n_minutes` starts with the run
        self.failures = FailureWatch(spec.reward.failure_warn_share, spec.reward.stop_after_failing_steps)
        self.tool_silence = ToolSilence(spec)
        self.hinter = Hinter.from_spec(spec.curriculum, self.tokenizer) if spec.curriculum.hints else None
        if resume_dir is not None:
            checkpoint.load_trainer_state(self, resume_dir)
            # A sharded checkpoint's weights were loaded into the sharded model just now: the
            # engine (or its whole copy) still holds the weights the model started from.
            self._sync_sampler()
            reporter.log(f"resumed from {resume_dir} at step {self.step_count}")

    def _shard(self) -> torch.nn.Module | None:
        """Shard the policy and the reference on the mesh (trainers.scale.sharding); returns the whole copy
        to sample from, taken first, when something needs one (else None).

        A sharded model cannot generate on one process alone: generation lengths differ between
        processes, so their forward counts would, and rank 0 validates alone. An engine that
        samples from the model object it is given (transformers), and IGPO's information-gain
        passes (each process's own episodes), get a whole frozen copy instead, refreshed from the
        gathered shards after each update (`_sync_sampler`); vLLM holds its own copy already.

        The reference is sharded like the policy: it is as large as the policy, and holding it
        whole on every process would undo what sharding saves. Its forwards are then collective
        too, and follow the same rule as the policy's (`_frozen_logprobs`). A LoRA run's reference
        is the policy itself with its adapters off: sharded with it."""
        spec = self.spec
        needs_copy = engine_class(spec.rollout.engine).samples_from_model or spec.algorithm.info_gain_weight > 0
        whole = full_copy(self.model) if needs_copy else None
        shard_model(self.model, self.mesh, spec.parallel)
        if self.reference is not None and self.reference.model is not self.model:
            shard_model(self.reference.model, self.mesh, spec.parallel)
        return whole

    @property
    def sampling_model(self) -> torch.nn.Module:
        """The model generation and IGPO run on: the policy, or its whole copy when it is sharded."""
        return self.sampling_copy if self.sampling_copy is not None else self.model

    def _sync_sampler(self) -> None:
        """Make the engine sample from the policy's current weights (version `step_count`). Sharded, the
        weights are gathered one tensor at a time into the whole copy or straight into vLLM: every process
        at once. Asynchronous, they go in between two of the generator's requests, and into vLLM now rather
        than at its next request: by then the trainer is changing them, and the generator stamps the
        version set here on what that request samples."""
        with self._sampler_to_itself():
            if self.sampling_copy is not None:
                copy_weights_into(self.sampling_copy, export_weights(self.model))
            self.engine.update_weights(self.sampling_model)
            if self.asynchronous:
                self.engine.sync_weights()
            if self.pipeline is not None:
                self.pipeline.weights_updated(self.step_count)

    def _sampler_to_itself(self) -> AbstractContextManager:
        """A context holding the sampler (and the data position) away from the asynchronous generator: for
        the weight update, validation and checkpoints. Synchronous, there is nobody to hold it from."""
        if self.pipeline is None:
            return nullcontext()
        return _both(self.pipeline.gate.update(), self.data_lock)

    @property
    def max_completion_tokens(self) -> int:
        """The longest completion: one turn's max_new_tokens, or what an episode may hold after its prompt
        (trainers.spec.token_bounds)."""
        return self.spec.token_bounds.after_prompt

    @property
    def sampling(self) -> SamplingParams:
        # Engine logprobs only matter where the sampler is not the trainer (vLLM, or the asynchronous
        # pipeline's copy, whose weights are older): to measure the gap and, with an off-policy correction,
        # correct for it. Synchronous, the transformers engine samples from the policy itself.
        separate_sampler = self.spec.rollout.engine != "transformers" or self.asynchronous
        return SamplingParams.from_spec(
            self.spec, logprobs=separate_sampler or self.spec.algorithm.off_policy is not None
        )

    # ------------------------------------------------------------------ the run

    def fit(self, should_stop: Callable[[], bool]) -> RunResult:
        """Steps until total_steps or until `should_stop()` says so (checked between steps);
        a final checkpoint either way when `save_final`."""
        spec, reporter = self.spec, self.reporter
        metrics: dict[str, float] = {}
        stopped = False
        failed: str | None = None
        if self.step_count == 0:  # the step-0 baseline (at_start); a resumed run validated its step before
            self._validate()  # the checkpoint it resumed from
        while self.step_count < spec.optim.total_steps and not failed:
            # The cancel reaches one process (rank 0 under the studio); every process must agree to stop,
            # or the others would wait in the step's collectives for a process that has left.
            if any_process(should_stop(), self.dist, self.device):
                stopped = True
                break
            metrics = mean_over_processes(self.step(), self.dist)
            # From the rates averaged over processes, so every process decides the same way.
            failed = self.failures.observe(self.step_count, metrics, self.reporter)
            self.tool_silence.observe(self.step_count, metrics, self.reporter)
            # Rollouts last: reporters may treat them as the end of the step (the worker flushes then).
            reporter.metrics(self.step_count, metrics)
            reporter.log(
                f"step {self.step_count}/{spec.optim.total_steps}: reward {metrics['reward/mean']:.3f}"
                f" loss {metrics.get('actor/loss', float('nan')):.4f} ({metrics['timing/step_s']:.2f}s)"
            )
            with self.data_lock:
                reporter.prompt_stats(self.step_count, self.curriculum.take_events())
            # Every process's rollouts, in rank order: rank 0 reports them all (collective).
            reporter.rollouts(self.step_count, gathered_lists(self.rollouts(self.last_groups), self.dist))
            if not failed:  # before the checkpoint: a run resumed from it has validated this step
                self._validate()
            if self._checkpoint_due() and not failed:
                self._save(save_checkpoint)
        if failed:  # the reward meant nothing for several steps: no final checkpoint of that training
            reporter.status("failed", failed)
            return RunResult("failed", self.step_count, metrics, self.last_checkpoint, failed)
        if spec.checkpoint.save_final and self.step_count > 0 and not self._saved_at_current_step():
            self._save(save_checkpoint, final=True)
        status = "cancelled" if stopped else "succeeded"
        detail = f"stopped at step {self.step_count}" if stopped else f"{self.step_count} steps"
        reporter.status(status, detail)
        return RunResult(status, self.step_count, metrics, self.last_checkpoint, detail)

    def _validate(self) -> None:
        """Validation after the current step when it is due (trainers.run.validation); the main process
        alone samples it, on its own random stream, and reports it."""
        if self.validator is not None and self.dist.is_main and self.validator.due(self.step_count):
            with self._sampler_to_itself():
                self.validator.run(self.step_count, self.engine, self.rubric, self.tokenizer, self.reporter)

    def _checkpoint_due(self) -> bool:
        """Every `every_n_steps` steps, or once `every_n_minutes` have passed since the last save (or the
        start); every process gets the same answer (their clocks differ by a little)."""
        every, minutes = self.spec.checkpoint.every_n_steps, self.spec.checkpoint.every_n_minutes
        if every and self.step_count % every == 0:
            return True
        if not minutes:
            return False
        return any_process(time.monotonic() - self.saved_at >= minutes * 60, self.dist, self.device)

    def _save(self, save_checkpoint, final: bool = False) -> None:
        """Every process writes its shards and its own state (trainers.run.checkpoint); rank 0 reports.
        A final checkpoint is also exported as a transformers folder."""
        with self._sampler_to_itself():  # asynchronous: the queue and the groups in flight are not saved
            path = save_checkpoint(self, final=final)
        self.last_checkpoint = str(path)
        self.saved_at = time.monotonic()
        if self.dist.is_main:
            self.reporter.checkpoint(self.step_count, str(path))

    def _saved_at_current_step(self) -> bool:
        return self.last_checkpoint is not None and Path(self.last_checkpoint).name == f"step-{self.step_count}"

    def close(self) -> None:
        if self.pipeline is not None:
            self.pipeline.close()
        if self.pipeline_rubric is not None:
            self.pipeline_rubric.close()
        self.engine.close()
        self.rubric.close()
        cleanup(self.dist)

    # ------------------------------------------------------------------ one step

    def step(self) -> dict[str, float]:
        """One step of the algorithm: 1-3 sample, generate and score groups; 4-8 train on those
        with a signal; then the schedule and the sampler's weights move on."""
        started = time.perf_counter()
        timings: dict[str, float] = {"generate": 0.0, "score": 0.0}
        self.info_gain_metrics: dict[str, float] = {}
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)  # perf/gpu_mem_peak_gb is this step's peak

        if self.asynchronous:
            kept, generated, rounds = self._take_groups(timings)
        else:
            kept, generated, rounds = self._collect_groups(timings)
        procedural = self._adapt_difficulty(generated)
        train_groups = kept[: self.local_prompts]
        train_started = time.perf_counter()
        self.guidance = self._guidance_batch(generated)
        metrics = self._train_on(train_groups)
        lr = self._advance_schedule()
        self.step_count += 1  # the policy's version: updates applied
        self._sync_sampler()
        self.last_groups = generated
        self.last_trained = {id(grp) for grp in train_groups}

        timings["step"] = time.perf_counter() - started
        timings["train"] = time.perf_counter() - train_started
        if self.asynchronous:
            metrics |= self._async_metrics(train_groups, timings)
        first_round = generated[: self.local_prompts]
        self.failures.remember_errors(first_round)
        return (
            metrics
            | self._reward_metrics(first_round)
            | self._step_metrics(first_round, generated, train_groups, timings, rounds, lr)
            | self.info_gain_metrics
            | self.guidance_metrics
            | self.curriculum.metrics()
            | (self.hinter.step_metrics() if self.hinter is not None else {})
            | procedural
        )

    # ------------------------------------------------------------------ asynchronous rollouts

    def _take_groups(self, timings: dict[str, float]) -> tuple[list[Group], list[Group], int]:
        """Asynchronous: the step's groups from the pipeline's queue (trainers.run.pipeline), as
        `_collect_groups` returns them (kept, every group taken, rounds); groups holding a token more than
        max_staleness versions older than the weights trained from are dropped there. Dynamic sampling
        examines up to its rounds' worth of groups for ones whose rewards differ."""
        algo, count = self.spec.algorithm, self.local_prompts
        pipeline = self._pipeline()
        self.counters_before = replace(pipeline.counters)
        rounds = algo.dynamic_sampling_max_rounds if algo.dynamic_sampling else 1
        self.taken: Taken[Group] = pipeline.take(
            count, count * rounds, self.step_count, lambda grp: grp.has_spread or not algo.dynamic_sampling
        )
        return self.taken.kept, self.taken.examined, math.ceil(len(self.taken.examined) / count)

    def _pipeline(self) -> Pipeline[Group]:
        """The asynchronous pipeline, started at the first step (after a resume, from the resumed weights)."""
        if self.pipeline is None:
            self.engine.sync_weights()  # version step_count, before the generator (and the trainer) goes on
            self.pipeline_rubric = Rubric.from_spec(self.spec.rubric)
            self.pipeline = Pipeline(
                self.spec.rollout.asynchronous, groups_per_step=self.local_prompts, version=self.step_count,
                engine=self.engine, tokenizer=self.tokenizer, params=self.sampling, draw=self._draw,
                score=self._score_finished, environment=self.spec.environment,
            )  # fmt: skip
            self.pipeline.start()
        return self.pipeline

    def _draw(self, n: int) -> tuple[list[Prompt], Allocation]:
        """The generator's next `n` prompts and their group sizes (from the generator thread)."""
        with self.data_lock:
            prompts = self.curriculum.draw(n)
            return prompts, self.curriculum.allocate(prompts)

    def _score_finished(self, prompts: list[Prompt], episodes: list[list[Episode]]) -> list[Group]:
        """Finished groups scored and shaped (from the scorer thread); their verdicts reach the curriculum."""
        assert self.pipeline_rubric is not None
        groups = self._shaped(score_groups(self.pipeline_rubric, prompts, episodes, self.spec.environment))
        with self.data_lock:
            self._observe(groups)
        return groups

    def _async_metrics(self, train_groups: list[Group], timings: dict[str, float]) -> dict[str, float]:
        """`async/*` of the step just taken: staleness of what it trained on, groups dropped for staleness,
        the queue, and how busy the engine and the trainer were over the step's wall time. The engine's and
        the scorer's seconds in the step window become `timing/generate_s` and `timing/score_s`."""
        assert self.pipeline is not None
        now, before, taken = self.pipeline.counters, self.counters_before, self.taken
        timings["generate"] = now.engine_s - before.engine_s
        timings["score"] = now.score_s - before.score_s
        step_s = max(timings["step"], 1e-9)
        waited = taken.wait_s + self.pipeline.gate.last_wait_s
        episodes = [ep for grp in train_groups for ep in grp.episodes]
        return async_metrics(episodes, self.step_count - 1, self.spec.rollout.asynchronous.max_staleness) | {
            "async/dropped_stale": float(taken.dropped_stale),
            "async/dropped_stale_total": float(now.dropped_stale),
            "async/queue_depth": float(taken.queue_depth),
            "async/policy_version": float(self.step_count - 1),
            "async/engine_busy": min(1.0, timings["generate"] / step_s),
            "async/trainer_busy": max(0.0, 1.0 - waited / step_s),
            "timing/wait_s": waited,
        }

    def _adapt_difficulty(self, generated: list[Group]) -> dict[str, float]:
        """A procedural run: the step's pass rate (over every process) moves the difficulty of
        the next step's prompts; returns `procedural/difficulty` and `procedural/pass_rate`."""
        if not isinstance(self.source, ProceduralSource):
            return {}
        # The model's own pass rate: a hinted retry was given part of the answer, so it does not count.
        unhinted = [r for grp in generated if grp.prompt.hint is None for r in grp.results]
        passes = self.curriculum.passes(unhinted)  # the one pass rule
        counts = torch.tensor([float(sum(passes)), float(len(passes))], device=self.device)
        passed, total = sum_over_processes(counts, self.dist).tolist()
        with self.data_lock:
            return self.source.observe(int(passed), int(total))

    def _train_on(self, train_groups: list[Group]) -> dict[str, float]:
        """4-8 on the groups with a signal; with none, this process still joins the others' passes."""
        if train_groups:
            return self._update(train_groups)
        self.reporter.log(f"step {self.step_count + 1}: every group's rewards agree; no update")
        if self.dist.enabled:  # the others' passes are collective: this process joins each of them
            self._frozen_logprobs(self.model, None)
            if self.reference is not None:
                with self.reference.context():
                    self._frozen_logprobs(self.reference.model, None)
            for k in range(self.spec.algorithm.ppo_epochs):
                self._select(None, None, None, k)
                self._join_pass_without_data()
        return {}

    def _guidance_batch(self, groups: list[Group]) -> TokenBatch | None:
        """Off-policy guidance (`algorithm.guidance_coef`): the reference solutions of this process's failed
        groups this step (trainers.run.guidance), one row per prompt; sets `guidance/prompt_frac`."""
        algo = self.spec.algorithm
        self.guidance_metrics = {}
        if algo.guidance_coef == 0:
            return None
        prompts, solutions = guidance_rows(groups, self.tokenizer, algo.guidance_field, self.curriculum.passes)
        unhinted = sum(grp.prompt.hint is None for grp in groups)
        self.guidance_metrics = {"guidance/prompt_frac": len(prompts) / max(1, unhinted)}
        if not prompts:
            return None
        return TokenBatch.build(prompts, solutions, pad_id=self.pad_id, device=self.device)

    def _advance_schedule(self) -> float:
        """Step the learning-rate schedule; returns the rate this step's update used."""
        lr = self.scheduler.get_last_lr()[0]
        with warnings.catch_warnings():
            # The schedule counts steps, updated or not; torch warns when a step had no optimiser step.
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            self.scheduler.step()
        return lr

    def _step_metrics(
        self, first_round: list[Group], generated: list[Group], train_groups: list[Group],
        timings: dict[str, float], rounds: int, lr: float,
    ) -> dict[str, float]:  # fmt: skip
        """Responses, timing, throughput and data position of the step just taken."""
        episodes = [ep for grp in first_round for ep in grp.episodes]
        num_tokens = sum(len(ep.completion_ids) for grp in generated for ep in grp.episodes)
        # Tokens the training passes run over (prompt + completion of every trained sequence).
        train_tokens = sum(len(ep.prompt_ids) + len(ep.completion_ids) for grp in train_groups for ep in grp.episodes)
        step_s, train_s = timings["step"], timings["train"]
        metrics = {
            # Sampled tokens: what the model wrote (observation tokens are counted under episode/).
            "response/length_mean": float(np.mean([ep.sampled_tokens for ep in episodes])),
            "response/length_max": float(max(ep.sampled_tokens for ep in episodes)),
            "response/truncated_frac": float(np.mean([ep.end_reason in ("length", "token_budget") for ep in episodes])),
            "actor/lr": lr,
            "timing/generate_s": timings["generate"],
            "timing/score_s": timings["score"],
            "timing/train_s": train_s,
            "timing/step_s": step_s,
            "perf/tokens_per_s": num_tokens / step_s,
            "perf/gen_tokens_per_s": num_tokens / max(timings["generate"], 1e-9),
            "perf/train_tokens_per_s": train_tokens / max(train_s, 1e-9),
            "data/epoch": self.source.epoch + self.source.index / len(self.source.prompts),
            "data/generation_rounds": float(rounds),
            "data/groups_kept": float(len(train_groups)),
        }
        if self.spec.environment is not None:
            metrics |= episode_metrics(episodes) | {"timing/tool_s": timings.get("tool", 0.0)}
        if self.device.type == "cuda":
            metrics["perf/gpu_mem_peak_gb"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        return metrics

    def _collect_groups(self, timings: dict[str, float]) -> tuple[list[Group], list[Group], int]:
        """Groups for this step: the curriculum's sampler draws the prompts, its budget sizes their
        groups, and every scored group updates its prompt's statistics. With dynamic sampling,
        groups whose rewards all agree carry no signal (zero advantage) and are dropped; more
        prompts are drawn until the batch is full or `dynamic_sampling_max_rounds` is reached
        (DAPO, arXiv:2503.14476, section 3.2). Returns (kept groups, every generated group, rounds used)."""
        algo, n_prompts = self.spec.algorithm, self.spec.optim.prompts_per_step
        kept: list[Group] = []
        generated: list[Group] = []
        max_rounds = algo.dynamic_sampling_max_rounds if algo.dynamic_sampling else 1
        rounds = 0
        # Under several processes every one draws each round's prompts, generating only while it
        # still needs groups: their data positions stay in step and their shards never overlap.
        while rounds < max_rounds and any_process(len(kept) < self.local_prompts, self.dist, self.device):
            rounds += 1
            prompts = shard(self.curriculum.draw(n_prompts), self.dist)
            groups = self._generate_and_score(prompts, timings) if len(kept) < self.local_prompts else []
            self._observe(groups)
            generated.extend(groups)
            groups = self._with_hints(groups, generated, timings)
            kept.extend(g for g in groups if g.has_spread or not algo.dynamic_sampling)
        return kept, generated, rounds

    def _with_hints(self, groups: list[Group], generated: list[Group], timings: dict[str, float]) -> list[Group]:
        """Hints (opt-in, trainers.curriculum.hints): each group whose samples all failed is sampled
        again with the start of its reference solution opening the answer, and its last retry takes
        its place in training, with its own advantage baseline. The retries join `generated` (after
        the round's groups: the step's reward metrics stay those of the unhinted first round)."""
        if self.hinter is None:
            return groups
        # A retry has the group size of the group it replaces, whatever the budget gave this round.
        chunk = self.spec.curriculum.generation_chunk
        groups, hinted = self.hinter.retry(
            groups, lambda prompts, sizes: self._generate_and_score(prompts, timings, Allocation(sizes, chunk))
        )
        generated.extend(hinted)
        return groups

    def _observe(self, groups: list[Group]) -> None:
        """Each scored group's pass verdicts into the prompt statistics, every process's groups on
        every process (collective), so each process's curriculum chooses what the others' do."""
        verdicts = [(grp.prompt.id, self.curriculum.passes(grp.results)) for grp in groups]
        self.curriculum.observe(self.step_count + 1, gathered_lists(verdicts, self.dist))

    def _generate_and_score(
        self, prompts: list[Prompt], timings: dict[str, float], allocation: Allocation | None = None
    ) -> list[Group]:
        algo = self.spec.algorithm
        allocation = allocation or self.curriculum.allocate(prompts)  # each prompt's group size
        scored = generate_and_score(
            self.engine, self.rubric, prompts, allocation.sizes, self.sampling, timings,
            tokenizer=self.tokenizer, environment=self.spec.environment, chunk=allocation.chunk,
        )  # fmt: skip
        episodes = [ep for s in scored for ep in s.episodes]
        for ep in episodes:
            ep.stamp_version(self.step_count)  # sampled by the weights this step trains from
        if algo.info_gain_weight > 0:  # IGPO (opt-in): information-gain turn rewards, before they are summed below
            t0 = time.perf_counter()
            found = apply_info_gain(self.sampling_model, self.tokenizer, episodes, weight=algo.info_gain_weight,
                                    answer_field=algo.info_gain_answer_field, batch_size=self.spec.optim.micro_batch_size,
                                    gain=algo.info_gain_type)  # fmt: skip
            timings["score"] += time.perf_counter() - t0
            # Reported for the step's first round, as the reward metrics are.
            self.info_gain_metrics = self.info_gain_metrics or found
        return self._shaped(scored)

    def _shaped(self, scored: list[ScoredGroup]) -> list[Group]:
        """Scored groups as training uses them: the soft overlong penalty added to the rewards, and whether
        each group's outcomes differ (dynamic sampling keeps only those)."""
        algo = self.spec.algorithm
        episodes = [ep for s in scored for ep in s.episodes]
        outcomes = torch.tensor([r.reward for s in scored for r in s.results], dtype=torch.float32)  # (B,)
        rewards = outcomes
        if algo.overlong_penalty:
            lengths = torch.tensor([len(ep.completion_ids) for ep in episodes])  # (B,)
            rewards = rewards + overlong_soft_penalty(
                lengths, self.max_completion_tokens, algo.overlong_buffer, algo.overlong_penalty_factor
            )
        turn_sums = torch.tensor([sum(t.reward for t in ep.turns) for ep in episodes], dtype=torch.float32)  # (B,)
        sizes = torch.tensor([len(s.episodes) for s in scored], dtype=torch.long)  # (P,)
        group_index = torch.arange(len(scored)).repeat_interleave(sizes)  # (B,)
        starts = [0, *torch.cumsum(sizes, 0).tolist()]  # group k is samples starts[k]:starts[k + 1]
        # Dynamic sampling keeps groups whose outcomes (with turn rewards) differ (DAPO): a length
        # penalty alone telling the samples apart is no signal about the answers.
        spread = groups_with_reward_spread(outcomes + turn_sums, group_index)  # (B,)
        return [
            Group(
                s.prompt,
                s.episodes,
                s.results,
                rewards[starts[k] : starts[k + 1]].tolist(),
                has_spread=bool(spread[starts[k]]),
            )
            for k, s in enumerate(scored)
        ]

    def _update(self, groups: list[Group]) -> dict[str, float]:
        """Steps 4-8 of the algorithm on the groups kept for training; returns their metrics."""
        batch = self._step_batch(groups)
        started = time.perf_counter()
        old_logp, ref_logp = self._old_and_reference_logprobs(batch)
        old_ref_s = time.perf_counter() - started  # the no-grad passes' share of timing/train_s
        metrics, is_weights = self._sampler_mismatch(batch, old_logp)
        advantages = self._advantages(groups, batch, old_logp, ref_logp)
        algo = self.spec.algorithm  # NSR / PSR / W-REINFORCE: positive and negative advantages weighed apart
        advantages, loss_mask = signed_advantage_weights(
            advantages,
            batch.loss_mask,
            positive=algo.positive_advantage_weight,
            negative=algo.negative_advantage_weight,
        )
        batch = replace(batch, loss_mask=loss_mask)
        metrics |= self._optimisation_passes(batch, advantages, old_logp, ref_logp, is_weights)
        return metrics | advantage_metrics(advantages, batch.mask) | {"timing/old_ref_s": old_ref_s}

    def _step_batch(self, groups: list[Group]) -> StepBatch:
        """4. The groups' episodes as one padded batch: prompt, then every sampled and observation
        token; the masks (sampled tokens only), outcome and turn rewards, and the turn layout."""
        samples = [(grp, j) for grp in groups for j in range(len(grp.episodes))]
        episodes = [grp.episodes[j] for grp, j in samples]
        tokens = TokenBatch.build(
            [ep.prompt_ids for ep in episodes], [ep.completion_ids for ep in episodes], pad_id=self.pad_id,
            device=self.device,
        )  # fmt: skip
        T = tokens.completion_mask.shape[1]
        trained = self._per_token([ep.trained_mask for ep in episodes], T)  # (B, T)
        # An episode whose environment failed says nothing about the model: it does not train.
        excluded = torch.tensor([ep.end_reason == "error" for ep in episodes], device=self.device)  # (B,)
        if self.spec.algorithm.overlong_filter:
            excluded |= torch.tensor(
                [ep.end_reason in ("length", "token_budget") for ep in episodes], device=self.device
            )
        outcomes = [grp.rewards[j] for grp, j in samples]
        return StepBatch(
            tokens=tokens,
            trained=trained,
            loss_mask=overlong_loss_mask(excluded, trained),
            group_index=torch.tensor([k for k, grp in enumerate(groups) for _ in grp.episodes], device=self.device),
            rewards=torch.tensor(outcomes, device=self.device),
            turn_rewards=self._per_token([turn_reward_row(ep) for ep in episodes], T),
            turns=TurnLayout.build(
                [ep.turn_index for ep in episodes],
                [[t.reward for t in ep.turns] for ep in episodes],
                outcomes,
                [[t.state for t in ep.turns] for ep in episodes],
                columns=T,
                device=self.device,
                turn_advantage_weight=self.spec.algorithm.turn_advantage_weight,
                step_advantage_weight=self.spec.algorithm.step_advantage_weight,
                tool_turns=[[bool(t.tool_calls) for t in ep.turns] for ep in episodes],
                modes=credit_modes(self.spec.algorithm),
            ),
            engine_logp=self._engine_logprobs(episodes, T),
        )

    def _per_token(self, rows: list[list[float]], columns: int) -> torch.Tensor:
        """(B, columns) float from per-episode lists over completion tokens (0 past each one's end)."""
        out = torch.zeros((len(rows), columns))
        for i, row in enumerate(rows):
            out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
        return out.to(self.device)

    def _old_and_reference_logprobs(self, batch: StepBatch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """5. (old, reference) logprobs, no grad, each only when something needs it. With one pass
        the policy that sampled is the one being differentiated: the loss uses logp.detach(), and
        the engine/trainer gap alone is read off the training forward (dropout off)."""
        algo = self.spec.algorithm
        gap_from_training = batch.engine_logp is not None and algo.ppo_epochs == 1 and self.spec.model.disable_dropout
        need_old = (
            algo.ppo_epochs > 1
            or (algo.kl_in_reward and self.reference is not None)
            or algo.off_policy is not None
            or (batch.engine_logp is not None and not gap_from_training)
            or algo.selects_tokens  # the selection's first pass reads the old pass (with entropy for forking tokens)
        )
        # Without need_old this process still joins the others' old-logprob passes (a sharded model's
        # forwards are collective): with no batch it runs idle passes only, when another needs them.
        with_entropy = self.selector is not None and self.selector.needs_entropy
        old_logp, self.old_entropy = self._frozen_logprobs_and_entropy(
            self.model, batch.tokens if need_old else None, with_entropy
        )
        ref_logp = None
        if self.reference is not None:
            with self.reference.context():
                ref_logp = self._frozen_logprobs(self.reference.model, batch.tokens)
        return old_logp, ref_logp

    def _sampler_mismatch(
        self, batch: StepBatch, old_logp: torch.Tensor | None
    ) -> tuple[dict[str, float], torch.Tensor | None]:
        """5b. The sampler/trainer logprob gap and, with an off-policy correction (`algorithm.off_policy`), its
        per-token weights: the old logprobs are the proximal policy's, the engine's each token's behaviour
        policy's (in an asynchronous run, the version that sampled it)."""
        correction = self.spec.algorithm.off_policy
        if batch.engine_logp is None or old_logp is None:
            return {}, None
        metrics = logprob_gap(batch.engine_logp, old_logp, batch.mask)
        if correction is None:
            return metrics, None
        out = OFF_POLICY_CORRECTIONS.get(correction.name)(
            old_logp, batch.engine_logp, batch.mask, low=correction.low, high=correction.high
        )
        if self.spec.algorithm.tis_cap is not None:  # the key runs with tis_cap have always reported
            metrics["rollout/tis_clip_frac"] = out.truncated_frac
        return metrics | out.metrics(), out.weights.to(old_logp.dtype)

    def _advantages(
        self, groups: list[Group], batch: StepBatch, old_logp: torch.Tensor | None, ref_logp: torch.Tensor | None
    ) -> torch.Tensor:
        """6-7. Token rewards (the outcome on the last valid token, minus beta * KL per token when
        the KL is in the reward), then the advantage estimator; each group keeps its sequence means."""
        algo = self.spec.algorithm
        kl_reward = None
        if algo.kl_in_reward and ref_logp is not None:
            kl_reward = kl_penalty(old_logp, ref_logp, algo.kl_estimator)  # (B, T)
        token_rewards = token_level_rewards(batch.rewards, batch.mask, kl_reward, algo.kl_beta)  # (B, T)
        token_rewards = token_rewards + batch.turn_rewards  # each turn's environment reward at its end
        advantages, _returns = self.advantage_fn(
            token_rewards, batch.mask, batch.group_index, eps=algo.adv_eps, gamma=algo.gamma, turns=batch.turns
        )
        sequence_advantages = iter(masked_mean(advantages, batch.mask, dim=-1).tolist())
        turn_advantages = iter(batch.turns.turn_means(advantages).tolist())  # (B, K)
        for grp in groups:
            grp.advantages = [next(sequence_advantages) for _ in grp.episodes]
            for ep in grp.episodes:
                for turn, value in zip(ep.turns, next(turn_advantages), strict=False):
                    turn.advantage = value
        return advantages

    def _optimisation_passes(self, batch: StepBatch, advantages, old_logp, ref_logp, is_weights) -> dict[str, float]:
        """8. `ppo_epochs` passes; their diagnostics averaged (a single pass reports its own)."""
        trainer_logp = torch.zeros_like(batch.mask) if batch.engine_logp is not None and old_logp is None else None
        passes = []
        for k in range(self.spec.algorithm.ppo_epochs):
            selected = self._select(batch.tokens, batch.loss_mask, advantages, k, old_logp)
            out = self._optimise(
                batch.tokens, batch.loss_mask, advantages, old_logp, ref_logp, is_weights, trainer_logp,
                selected=selected, guidance=self.guidance,
            )  # fmt: skip
            passes.append(out | (selected.metrics if selected is not None else {}))
        metrics = logprob_gap(batch.engine_logp, trainer_logp, batch.mask) if trainer_logp is not None else {}
        return metrics | {key: float(np.mean([p[key] for p in passes])) for key in passes[0]}

    def _frozen_logprobs(self, model, batch: TokenBatch | None) -> torch.Tensor | None:
        """(B, T) logprobs of the completion tokens, without gradient; None without a batch. Sharded,
        every process runs as many passes as the process with the most micro-batches (idle passes
        for the rest), a process without a batch included."""
        return self._frozen_logprobs_and_entropy(model, batch)[0]

    def _frozen_logprobs_and_entropy(
        self, model, batch: TokenBatch | None, with_entropy: bool = False
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """`_frozen_logprobs` and, `with_entropy`, the (B, T) entropy at each completion position."""
        micro_batching = MicroBatching.of(self.spec.optim)
        idle = self._idle_passes(len(micro_batching.split(batch)) if batch is not None else 0)
        logp = entropy = None
        with autocast(model, self.precision):
            if batch is not None:
                logp, entropy = batched_logprobs(
                    model,
                    batch,
                    micro_batching=micro_batching,
                    temperature=self.spec.rollout.temperature,
                    with_entropy=with_entropy,
                    chunk_tokens=self.chunk_tokens,
                )
            for _ in range(idle):
                self._idle_pass(model, grad=False)
        return logp, entropy

    def _select(
        self, tokens: TokenBatch | None, loss_mask, advantages, pass_index: int, old_logp=None, row_ids=None
    ) -> Selected | None:
        """The pass's token selection (trainers.run.selection), over every process: from the old pass's
        logprobs (and entropy) on the first pass, which ran at the same weights, from a no-grad pass of
        its own on later ones. None without a selection, or without data (collective all the same)."""
        if self.selector is None:
            return None
        if pass_index == 0:
            logp, entropy = old_logp, self.old_entropy
        else:
            logp, entropy = self._frozen_logprobs_and_entropy(self.model, tokens, self.selector.needs_entropy)
        found = None
        if tokens is not None:
            assert logp is not None and old_logp is not None
            found = PassTokens(logp, entropy, old_logp, advantages, loss_mask, row_ids)
        return self.selector.select(found, self.step_count, pass_index)

    def _idle_passes(self, passes: int) -> int:
        """How many idle passes this process adds to its `passes` so that every process runs as
        many as the one with the most. Sharded, each pass's forward all-gathers and its backward
        reduce-scatters, over every process: a process that stopped early would leave the others
        waiting. Collective, asked before any of the passes (0 when not sharded)."""
        if self.mesh is None:
            return 0
        return max_over_processes(passes, self.dist, self.device) - passes

    def _idle_pass(self, model, *, grad: bool) -> None:
        """A pass over a one-token sequence that changes nothing: with `grad` its backward runs with
        weight 0, so every parameter a real pass reaches gets a gradient of exactly zero (FSDP
        reduce-scatters the same gradients on every process) and the step's gradient is the real
        micro-batches' alone."""
        tokens = TokenBatch.build([[self.pad_id]], [[self.pad_id]], pad_id=self.pad_id, device=self.device)
        pack_tokens = MicroBatching.of(self.spec.optim).pack_tokens
        with torch.set_grad_enabled(grad), autocast(model, self.precision):
            logp, _ = token_logprobs(model, tokens, chunk_tokens=self.chunk_tokens, pack_tokens=pack_tokens)
        if grad:
            (logp.sum() * 0.0).backward()

    def _engine_logprobs(self, episodes: list[Episode], columns: int) -> torch.Tensor | None:
        """(B, T) the engine's logprobs of the sampled tokens (0 on observations), when it reported them."""
        rows = [ep.engine_logprobs for ep in episodes]
        if any(row is None for row in rows):
            return None
        return self._per_token(rows, columns)

    def _optimise(
        self, batch, loss_mask, advantages, old_logp, ref_logp, is_weights, trainer_logp=None, *,
        selected: Selected | None = None, guidance: TokenBatch | None = None,
    ) -> dict[str, float]:  # fmt: skip
        """One pass over the batch in micro-batches with gradient accumulation, then one optimiser step.
        Each micro-batch's loss is weighted by its share of the aggregation units (tokens or
        sequences), so the accumulated gradient is that of the whole batch's loss. The forward
        pass's logprobs (before the step) are written into `trainer_logp` (B, T) when it is given.

        `selected` (trainers.run.selection): the policy gradient's own mask (forking tokens; the KL
        and entropy terms keep `loss_mask`) and the policy loss's token selection (Clip-Cov, KL-Cov).
        `guidance`: reference-solution rows whose guidance term (algorithm.guidance_coef times the
        token mean over every process's rows) joins the same gradient."""
        spec, algo = self.spec, self.spec.algorithm
        mode = algo.loss_agg_mode
        pg_mask = selected.pg_mask if selected is not None else loss_mask
        # The loss is the whole step's over every process: units are counted over all of them, and
        # each process's share is scaled by the process count, which averaging gradients divides out.
        # One reduction: the loss's units, the policy gradient's (forking tokens), the guidance tokens.
        guidance_tokens = (
            guidance.completion_mask.sum() if guidance is not None else torch.zeros((), device=self.device)
        )
        local = torch.stack(
            [aggregation_units(loss_mask, mode), aggregation_units(pg_mask, mode), guidance_tokens.to(self.device)]
        ).float()
        total_units, pg_units, total_guidance = sum_over_processes(local, self.dist).clamp(min=1).unbind()
        # FSDP2 averages each gradient over the mesh, replicate and shard dimensions alike.
        scale = self.dist.world_size
        local_units = local[0].clamp(min=1)
        sums: dict[str, float] = {}  # diagnostics: this process's own weighted means
        self.model.train()
        micro_batching = MicroBatching.of(spec.optim)
        splits = micro_batching.split(batch)
        guidance_splits = micro_batching.split(guidance) if guidance is not None else []
        idle = self._idle_passes(len(splits) + len(guidance_splits))  # agreed before the first forward
        for rows in splits:
            mb = batch.select(rows)
            T = mb.completion_mask.shape[1]
            m = loss_mask[rows, :T]
            pm = pg_mask[rows, :T]
            selection: TokenSelection | None = None
            if selected is not None and selected.selection is not None:
                selection = selected.selection.rows(rows, T)
            with autocast(self.model, self.precision):  # the loss below is float32 either way
                logp, entropy = token_logprobs(
                    self.model,
                    mb,
                    temperature=spec.rollout.temperature,
                    with_entropy=True,
                    entropy_grad=algo.entropy_coef > 0,
                    chunk_tokens=self.chunk_tokens,
                    pack_tokens=micro_batching.pack_tokens,
                )
            old = old_logp[rows, :T] if old_logp is not None else logp.detach()
            if trainer_logp is not None:
                trainer_logp[rows, :T] = logp.detach()
            out = self.policy_loss_fn(
                logp,
                old,
                advantages[rows, :T],
                pm,
                clip_ratio_low=algo.clip_ratio_low,
                clip_ratio_high=algo.clip_ratio_high,
                dual_clip_c=algo.dual_clip_c,
                loss_agg_mode=mode,
                loss_agg_norm=spec.loss_agg_norm,
                is_weights=is_weights[rows, :T] if is_weights is not None else None,
                selection=selection,
            )
            rest = torch.zeros((), device=logp.device)  # the KL and entropy terms, over every loss token
            parts = out.metrics()
            if ref_logp is not None:
                kl = kl_penalty(logp, ref_logp[rows, :T], algo.kl_estimator)  # (b, T)
                kl_loss = aggregate_loss(kl, m, mode, spec.loss_agg_norm)
                if not algo.kl_in_reward:
                    rest = rest + algo.kl_beta * kl_loss
                parts["actor/kl"] = kl_loss.item()
            entropy_loss = aggregate_loss(entropy, m, mode, spec.loss_agg_norm)
            if algo.entropy_coef > 0:
                rest = rest - algo.entropy_coef * entropy_loss
            parts["actor/entropy"] = entropy_loss.item()
            parts["actor/loss"] = (out.loss + rest).item()
            pg_weight = accumulation_weight(pm, pg_units, mode)
            ((out.loss * pg_weight + rest * accumulation_weight(m, total_units, mode)) * scale).backward()
            weight = accumulation_weight(m, local_units, mode).item()
            for key, value in parts.items():
                sums[key] = sums.get(key, 0.0) + value * weight
        if algo.guidance_coef > 0:
            sums |= self._guidance_passes(guidance, guidance_splits, total_guidance, scale, sums.get("actor/loss", 0.0))
        for _ in range(idle):
            self._idle_pass(self.model, grad=True)
        sums["actor/grad_norm"] = self._apply_gradients()
        return sums

    def _guidance_passes(
        self, guidance: TokenBatch | None, splits: list, total_tokens: torch.Tensor, scale: int, policy_loss: float
    ) -> dict[str, float]:
        """The guidance term's micro-batches (trainers.algorithms.guidance): coef * (their token losses' sum
        / every process's guidance tokens), accumulated into the pass's gradient. Returns `guidance/sft_loss`
        (this process's token mean) and `guidance/loss_share` (the term's share of the loss's magnitude)."""
        spec, algo = self.spec, self.spec.algorithm
        pack_tokens = MicroBatching.of(spec.optim).pack_tokens
        loss_sum, tokens = 0.0, 0.0
        for rows in splits:
            assert guidance is not None
            mb = guidance.select(rows)
            mask = mb.completion_mask
            with autocast(self.model, self.precision):
                logp, _ = token_logprobs(
                    self.model, mb, temperature=spec.rollout.temperature, chunk_tokens=self.chunk_tokens,
                    pack_tokens=pack_tokens,
                )  # fmt: skip
            part = masked_sum(guidance_token_loss(logp, mask, algo.guidance_shaping), mask)
            (algo.guidance_coef * part / total_tokens * scale).backward()
            loss_sum += part.item()
            tokens += mask.sum().item()
        sft_loss = loss_sum / tokens if tokens else 0.0
        return {
            "guidance/sft_loss": sft_loss,
            "guidance/loss_share": loss_share(algo.guidance_coef * sft_loss, policy_loss),
        }

    def _join_pass_without_data(self) -> None:
        """This process's part of an optimisation pass when all its groups were filtered out:
        no units and a gradient of zero, through the same collectives as the others."""
        sum_over_processes(torch.zeros(3, device=self.device), self.dist)  # as _optimise's one reduction
        for _ in range(self._idle_passes(0)):
            self._idle_pass(self.model, grad=True)
        self._apply_gradients()

    def _apply_gradients(self) -> float:
        """Clip the accumulated gradients (sharded, FSDP has reduced them over the processes during
        the backward passes), step the optimiser; returns the gradient norm before clipping."""
        params = trainable_parameters(self.model)
        max_norm = self.spec.optim.max_grad_norm if self.spec.optim.max_grad_norm is not None else float("inf")
        # Sharded, the norm is a DTensor over the mesh (its square summed over the shards).
        grad_norm = full_tensor(torch.nn.utils.clip_grad_norm_(params, max_norm)).item()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def _reward_metrics(self, groups: list[Group]) -> dict[str, float]:
        rewards = [r for grp in groups for r in grp.totals]
        out = {
            "reward/mean": float(np.mean(rewards)),
            "reward/std": float(np.std(rewards)),
            "reward/frac_zero_std_groups": float(np.mean([not g.has_spread for g in groups])),
        }
        results = [r for g in groups for r in g.results]
        for name in self.rubric.names:
            out[f"reward/{name}/mean"] = float(np.mean([r.scores[name].score for r in results]))
            # Raised, timed out or not run: such a score is 0 whatever the completion (see FailureWatch).
            out[f"{FAILURE_RATE}{name}"] = float(np.mean([r.scores[name].error is not None for r in results]))
        return out

    def rollouts(self, groups: list[Group]) -> list[Rollout]:
        """This process's groups as Rollouts. Their group ids are numbered over the step's groups on
        every process (a row drawn on two processes is "id" on the first and "id@1" on the second),
        so the gathered step has no two groups of one name. Every process must call it."""
        ids = [grp.prompt.id for grp in groups]
        per_process = gathered_lists([ids], self.dist)
        before = sum(len(part) for part in per_process[: self.dist.rank])
        group_ids = step_group_ids([i for part in per_process for i in part])[before : before + len(ids)]
        multi_turn = self.spec.environment is not None
        return [
            episode_rollout(
                ep,
                res,
                step=self.step_count,
                prompt_id=group_id,
                sample_index=j,
                reward=grp.totals[j],
                prompt=ep.messages if multi_turn else grp.prompt.row.prompt,
                advantage=grp.advantages[j] if grp.advantages else 0.0,
                trained=id(grp) in self.last_trained,
                multi_turn=multi_turn,
                hint=grp.prompt.hint,
                trained_version=self.step_count - 1,  # rollouts are reported after the step's update
            )  # fmt: skip
            for grp, group_id in zip(groups, group_ids, strict=True)
            for j, (ep, res) in enumerate(zip(grp.episodes, grp.results, strict=True))
        ]


@contextmanager
def _both(first: AbstractContextManager, second: AbstractContextManager) -> Iterator[None]:
    with first, second:
        yield
