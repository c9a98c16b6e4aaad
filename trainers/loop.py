"""The GRPO-family training loop: `train(spec, reporter, should_stop) -> RunResult`.

One step, in the order of the algorithm (`Trainer.step`):

    sample prompts -> generate a group per prompt -> score the completions with the rubric
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
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from trainers.algorithms.advantages import ADVANTAGES
from trainers.algorithms.aggregation import accumulation_weight, aggregate_loss, aggregation_units
from trainers.algorithms.filters import groups_with_reward_spread, overlong_loss_mask, overlong_soft_penalty
from trainers.algorithms.kl import kl_penalty
from trainers.algorithms.masked import masked_mean
from trainers.algorithms.policy_losses import POLICY_LOSSES
from trainers.algorithms.token_rewards import token_level_rewards
from trainers.data import Prompt, PromptSource, load_prompts
from trainers.distributed import (
    NullReporter,
    any_process,
    average_gradients,
    broadcast_parameters,
    cleanup,
    device_for,
    dist_info,
    init_distributed,
    mean_over_processes,
    shard,
    sum_over_processes,
)
from trainers.engines.base import Generation, RolloutEngine, SamplingParams, create_engine
from trainers.engines.mismatch import logprob_gap, tis_clip_frac, tis_weights
from trainers.logprobs import TokenBatch, batched_logprobs, micro_batches, token_logprobs
from trainers.models import Reference, default_device, load_policy, load_reference, trainable_parameters
from trainers.report import Reporter, Rollout, failure_reported
from trainers.rewards.rubric import Rubric
from trainers.rewards.sample import RubricResult, Sample
from trainers.spec import RunSpec


@dataclass
class RunResult:
    status: str  # "succeeded" | "cancelled" | "failed"
    steps: int  # optimiser steps completed (including those before a resume)
    metrics: dict[str, float] = field(default_factory=dict)  # the last step's
    checkpoint: str | None = None  # the last checkpoint written
    detail: str = ""


@dataclass
class Group:
    """The completions sampled for one prompt, with their rubric results and rewards."""

    prompt: Prompt
    generations: list[Generation]
    results: list[RubricResult]
    rewards: list[float]  # rubric reward (+ soft overlong penalty)
    advantages: list[float] = field(default_factory=list)  # sequence-level, set when trained on

    has_spread: bool = True  # the rubric outcomes are not all equal (else the answers carry no signal)


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


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


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


def train(spec: RunSpec, reporter: Reporter, should_stop: Callable[[], bool] = lambda: False) -> RunResult:
    """Run `spec` to the end (or until `should_stop()`), reporting as it goes.

    Reports status "running", then "succeeded" / "cancelled"; on an error, logs the traceback,
    reports "failed" with the message, and re-raises so the caller sees the exception.
    Under torchrun (`python -m trainers run --nproc N`) rank 0 alone reports."""
    if not dist_info().is_main:
        reporter = NullReporter()
    reporter.status("running", spec.name)
    trainer = None
    try:
        with failure_reported(reporter):
            trainer = Trainer(spec, reporter)
            return trainer.fit(should_stop)
    finally:
        if trainer is not None:
            trainer.close()


class Trainer:
    """Everything a run holds between steps: model, optimiser, engine, rubric, data position."""

    def __init__(self, spec: RunSpec, reporter: Reporter) -> None:
        from trainers import checkpoint  # the checkpoint module imports this one's types

        self.spec = spec
        self.reporter = reporter
        self.step_count = 0
        self.dist = init_distributed()  # a single process unless launched by torchrun
        # Prompts this process generates for per step: its share of prompts_per_step (all of it alone).
        self.local_prompts = len(shard(range(spec.optim.prompts_per_step), self.dist))
        seed_everything(spec.optim.seed)
        resume_dir = checkpoint.resolve_resume(spec.checkpoint) if spec.checkpoint.resume_from else None

        self.device = device_for(self.dist) if self.dist.enabled else default_device()
        self.model, self.tokenizer = load_policy(spec.model, self.device, checkpoint=resume_dir)
        if self.dist.enabled:
            broadcast_parameters(self.model, self.dist)  # e.g. fresh LoRA adapters: rank 0's everywhere
            torch.manual_seed(spec.optim.seed + self.dist.rank)  # each process samples its own completions
        self.reference: Reference | None = load_reference(
            spec.model, self.model, spec.algorithm.kl_beta, policy_is_initial=resume_dir is None
        )
        self.pad_id = self.tokenizer.pad_token_id
        self.source = PromptSource(
            load_prompts(spec.data, self.tokenizer), seed=spec.optim.seed, shuffle=spec.data.shuffle
        )
        self.rubric = Rubric.from_spec(spec.rubric)
        self.engine: RolloutEngine = create_engine(spec, model=self.model, tokenizer=self.tokenizer)
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
        self.last_checkpoint: str | None = None
        if resume_dir is not None:
            checkpoint.load_trainer_state(self, resume_dir)
            reporter.log(f"resumed from {resume_dir} at step {self.step_count}")

    @property
    def sampling(self) -> SamplingParams:
        # Engine logprobs only matter where the sampler is not the trainer (vLLM): to measure
        # the gap and, with tis_cap, correct for it. The transformers engine samples from the policy.
        separate_sampler = self.spec.rollout.engine != "transformers"
        return SamplingParams.from_spec(self.spec, logprobs=separate_sampler or self.spec.algorithm.tis_cap is not None)

    # ------------------------------------------------------------------ the run

    def fit(self, should_stop: Callable[[], bool]) -> RunResult:
        """Steps until total_steps or until `should_stop()` says so (checked between steps);
        a final checkpoint either way when `save_final`."""
        from trainers.checkpoint import save_checkpoint

        spec, reporter = self.spec, self.reporter
        every = spec.checkpoint.every_n_steps
        metrics: dict[str, float] = {}
        stopped = False
        while self.step_count < spec.optim.total_steps:
            if should_stop():
                stopped = True
                break
            metrics = mean_over_processes(self.step(), self.dist)
            # Rollouts last: reporters may treat them as the end of the step (the worker flushes then).
            reporter.metrics(self.step_count, metrics)
            reporter.log(
                f"step {self.step_count}/{spec.optim.total_steps}: reward {metrics['reward/mean']:.3f}"
                f" loss {metrics.get('actor/loss', float('nan')):.4f} ({metrics['timing/step_s']:.2f}s)"
            )
            reporter.rollouts(self.step_count, self.rollouts(self.last_groups))
            if every and self.step_count % every == 0:
                self._save(save_checkpoint)
        if spec.checkpoint.save_final and self.step_count > 0 and not self._saved_at_current_step():
            self._save(save_checkpoint)
        status = "cancelled" if stopped else "succeeded"
        detail = f"stopped at step {self.step_count}" if stopped else f"{self.step_count} steps"
        reporter.status(status, detail)
        return RunResult(status, self.step_count, metrics, self.last_checkpoint, detail)

    def _save(self, save_checkpoint) -> None:
        if not self.dist.is_main:  # every process holds the same weights; rank 0 writes them
            return
        path = save_checkpoint(self)
        self.last_checkpoint = str(path)
        self.reporter.checkpoint(self.step_count, str(path))

    def _saved_at_current_step(self) -> bool:
        return self.last_checkpoint is not None and Path(self.last_checkpoint).name == f"step-{self.step_count}"

    def close(self) -> None:
        self.engine.close()
        self.rubric.close()
        cleanup(self.dist)

    # ------------------------------------------------------------------ one step

    def step(self) -> dict[str, float]:
        spec = self.spec
        started = time.perf_counter()
        timings: dict[str, float] = {"generate": 0.0, "score": 0.0}
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)  # perf/gpu_mem_peak_gb is this step's peak

        # 1-3. sample prompts, generate a group per prompt, score (with DAPO dynamic sampling).
        kept, generated, rounds = self._collect_groups(timings)
        train_groups = kept[: self.local_prompts]
        first_round = generated[: self.local_prompts]

        # 4-8. logprobs, advantages, optimisation (skipped when no group carries a signal).
        train_started = time.perf_counter()
        metrics: dict[str, float] = {}
        if train_groups:
            metrics.update(self._update(train_groups))
        else:
            self.reporter.log(f"step {self.step_count + 1}: every group's rewards agree; no update")
            if self.dist.enabled:  # the other processes count units and average gradients with this one
                for _ in range(spec.algorithm.ppo_epochs):
                    self._join_pass_without_data()
        lr = self.scheduler.get_last_lr()[0]  # the rate this step's update used
        with warnings.catch_warnings():
            # The schedule counts steps, updated or not; torch warns when a step had no optimiser step.
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            self.scheduler.step()
        self.engine.update_weights(self.model)
        self.step_count += 1
        self.last_groups = generated
        self.last_trained = {id(grp) for grp in train_groups}

        step_s = time.perf_counter() - started
        train_s = time.perf_counter() - train_started
        all_gens = [g for grp in first_round for g in grp.generations]
        num_tokens = sum(len(g.token_ids) for grp in generated for g in grp.generations)
        # Tokens the training passes run over (prompt + completion of every trained sequence).
        train_tokens = sum(
            len(grp.prompt.token_ids) + len(g.token_ids) for grp in train_groups for g in grp.generations
        )
        metrics.update(
            self._reward_metrics(first_round)
            | {
                "response/length_mean": float(np.mean([len(g.token_ids) for g in all_gens])),
                "response/length_max": float(max(len(g.token_ids) for g in all_gens)),
                "response/truncated_frac": float(np.mean([g.finish_reason == "length" for g in all_gens])),
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
        )
        if self.device.type == "cuda":
            metrics["perf/gpu_mem_peak_gb"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        return metrics

    def _collect_groups(self, timings: dict[str, float]) -> tuple[list[Group], list[Group], int]:
        """Groups for this step. With dynamic sampling, groups whose rewards all agree carry no
        signal (zero advantage) and are dropped; more prompts are drawn until the batch is full
        or `dynamic_sampling_max_rounds` is reached (DAPO, arXiv:2503.14476, section 3.2).
        Returns (kept groups, every generated group, rounds used)."""
        algo, n_prompts = self.spec.algorithm, self.spec.optim.prompts_per_step
        kept: list[Group] = []
        generated: list[Group] = []
        max_rounds = algo.dynamic_sampling_max_rounds if algo.dynamic_sampling else 1
        rounds = 0
        # Under several processes every one draws each round's prompts, generating only while it
        # still needs groups: their data positions stay in step and their shards never overlap.
        while rounds < max_rounds and any_process(len(kept) < self.local_prompts, self.dist, self.device):
            rounds += 1
            prompts = shard(self.source.next_batch(n_prompts), self.dist)
            if len(kept) >= self.local_prompts:
                continue
            groups = self._generate_and_score(prompts, timings)
            generated.extend(groups)
            kept.extend(g for g in groups if g.has_spread or not algo.dynamic_sampling)
        return kept, generated, rounds

    def _generate_and_score(self, prompts: list[Prompt], timings: dict[str, float]) -> list[Group]:
        t0 = time.perf_counter()
        outputs = self.engine.generate([p.token_ids for p in prompts], self.spec.algorithm.group_size, self.sampling)
        t1 = time.perf_counter()
        # The rubric sees the completion text only; the prompt is context for criteria that want it.
        samples = [
            Sample(prompt=p.row.prompt, completion=g.text, fields=p.row.fields)
            for p, gens in zip(prompts, outputs, strict=True)
            for g in gens
        ]
        results = self.rubric.score(samples)
        timings["generate"] += t1 - t0
        timings["score"] += time.perf_counter() - t1

        algo, G = self.spec.algorithm, self.spec.algorithm.group_size
        outcomes = torch.tensor([r.reward for r in results], dtype=torch.float32)  # (B,) the rubric's verdicts
        rewards = outcomes
        if algo.overlong_penalty:
            lengths = torch.tensor([len(g.token_ids) for gens in outputs for g in gens])  # (B,)
            rewards = rewards + overlong_soft_penalty(
                lengths, self.spec.rollout.max_new_tokens, algo.overlong_buffer, algo.overlong_penalty_factor
            )
        group_index = torch.arange(len(prompts)).repeat_interleave(G)  # (B,)
        # Dynamic sampling keeps groups whose outcomes differ (DAPO): a length penalty alone
        # telling the samples apart is no signal about the answers.
        spread = groups_with_reward_spread(outcomes, group_index)  # (B,)
        return [
            Group(
                p,
                gens,
                results[k * G : (k + 1) * G],
                rewards[k * G : (k + 1) * G].tolist(),
                has_spread=bool(spread[k * G]),
            )
            for k, (p, gens) in enumerate(zip(prompts, outputs, strict=True))
        ]

    def _update(self, groups: list[Group]) -> dict[str, float]:
        algo = self.spec.algorithm
        samples = [(grp, j) for grp in groups for j in range(len(grp.generations))]
        gens = [grp.generations[j] for grp, j in samples]
        batch = TokenBatch.build(
            [grp.prompt.token_ids for grp, _ in samples],
            [g.token_ids for g in gens],
            pad_id=self.pad_id,
            device=self.device,
        )
        mask = batch.completion_mask  # (B, T)
        loss_mask = mask
        if algo.overlong_filter:
            truncated = torch.tensor([g.finish_reason == "length" for g in gens], device=self.device)  # (B,)
            loss_mask = overlong_loss_mask(truncated, mask)
        group_index = torch.tensor([k for k, grp in enumerate(groups) for _ in grp.generations], device=self.device)
        rewards = torch.tensor([grp.rewards[j] for grp, j in samples], device=self.device)  # (B,)

        # 5. old and reference logprobs (no grad). With one pass over the batch the policy that
        #    sampled is the one being differentiated, so old_logp = logp.detach() in the loss.
        engine_logp = self._engine_logprobs(gens, mask)  # (B, T) or None
        # The engine/trainer gap alone needs no forward pass of its own: with one pass and dropout
        # off, the training forward (before the step) computes the same logprobs.
        gap_from_training = engine_logp is not None and algo.ppo_epochs == 1 and self.spec.model.disable_dropout
        need_old = (
            algo.ppo_epochs > 1
            or (algo.kl_in_reward and self.reference is not None)
            or algo.tis_cap is not None
            or (engine_logp is not None and not gap_from_training)
        )
        old_logp = self._frozen_logprobs(self.model, batch) if need_old else None
        ref_logp = None
        if self.reference is not None:
            with self.reference.context():
                ref_logp = self._frozen_logprobs(self.reference.model, batch)
        metrics: dict[str, float] = {}
        is_weights = None
        if engine_logp is not None and old_logp is not None:
            metrics |= logprob_gap(engine_logp, old_logp, mask)
            if algo.tis_cap is not None:
                is_weights = tis_weights(old_logp, engine_logp, mask, algo.tis_cap)
                metrics["rollout/tis_clip_frac"] = tis_clip_frac(old_logp, engine_logp, mask, algo.tis_cap)

        # 6. token rewards: the outcome on the last valid token, minus beta * KL per token if in the reward.
        kl_reward = None
        if algo.kl_in_reward and ref_logp is not None:
            kl_reward = kl_penalty(old_logp, ref_logp, algo.kl_estimator)  # (B, T)
        token_rewards = token_level_rewards(rewards, mask, kl_reward, algo.kl_beta)  # (B, T)

        # 7. advantages
        advantages, _returns = self.advantage_fn(token_rewards, mask, group_index, eps=algo.adv_eps, gamma=algo.gamma)
        sequence_advantages = iter(masked_mean(advantages, mask, dim=-1).tolist())
        for grp in groups:
            grp.advantages = [next(sequence_advantages) for _ in grp.generations]

        # 8. optimisation passes; their diagnostics are averaged (a single pass reports its own)
        trainer_logp = torch.zeros_like(mask) if engine_logp is not None and old_logp is None else None
        passes = [
            self._optimise(batch, loss_mask, advantages, old_logp, ref_logp, is_weights, trainer_logp)
            for _ in range(algo.ppo_epochs)
        ]
        if trainer_logp is not None:
            metrics |= logprob_gap(engine_logp, trainer_logp, mask)
        metrics |= {key: float(np.mean([p[key] for p in passes])) for key in passes[0]}
        metrics |= {
            "advantage/mean": masked_mean(advantages, mask).item(),
            "advantage/std": advantages[mask.bool()].std().item() if mask.sum() > 1 else 0.0,
            "advantage/min": advantages[mask.bool()].min().item(),
            "advantage/max": advantages[mask.bool()].max().item(),
        }
        return metrics

    def _frozen_logprobs(self, model, batch: TokenBatch) -> torch.Tensor:
        """(B, T) logprobs of the completion tokens, without gradient."""
        logp, _ = batched_logprobs(
            model, batch, micro_batch_size=self.spec.optim.micro_batch_size, temperature=self.spec.rollout.temperature
        )
        return logp

    def _engine_logprobs(self, gens: list[Generation], mask: torch.Tensor) -> torch.Tensor | None:
        """(B, T) the engine's logprobs of the sampled tokens, when it reported them."""
        if any(g.logprobs is None for g in gens):
            return None
        engine_logp = torch.zeros_like(mask)
        for i, g in enumerate(gens):
            engine_logp[i, : len(g.logprobs)] = torch.tensor(g.logprobs, dtype=mask.dtype)
        return engine_logp

    def _optimise(
        self, batch, loss_mask, advantages, old_logp, ref_logp, is_weights, trainer_logp=None
    ) -> dict[str, float]:
        """One pass over the batch in micro-batches with gradient accumulation, then one optimiser step.
        Each micro-batch's loss is weighted by its share of the aggregation units (tokens or
        sequences), so the accumulated gradient is that of the whole batch's loss. The forward
        pass's logprobs (before the step) are written into `trainer_logp` (B, T) when it is given."""
        spec, algo = self.spec, self.spec.algorithm
        mode = algo.loss_agg_mode
        # The loss is the whole step's over every process: units are counted over all of them, and
        # each process's share is scaled by the process count, which averaging gradients divides out.
        local_units = aggregation_units(loss_mask, mode)
        total_units = sum_over_processes(local_units, self.dist).clamp(min=1)
        scale = self.dist.world_size
        local_units = local_units.clamp(min=1)
        sums: dict[str, float] = {}  # diagnostics: this process's own weighted means
        self.model.train()
        for rows in micro_batches(batch, spec.optim.micro_batch_size):
            mb = batch.select(rows)
            T = mb.completion_mask.shape[1]
            m = loss_mask[rows, :T]
            logp, entropy = token_logprobs(
                self.model,
                mb,
                temperature=spec.rollout.temperature,
                with_entropy=True,
                entropy_grad=algo.entropy_coef > 0,
            )
            old = old_logp[rows, :T] if old_logp is not None else logp.detach()
            if trainer_logp is not None:
                trainer_logp[rows, :T] = logp.detach()
            out = self.policy_loss_fn(
                logp,
                old,
                advantages[rows, :T],
                m,
                clip_ratio_low=algo.clip_ratio_low,
                clip_ratio_high=algo.clip_ratio_high,
                dual_clip_c=algo.dual_clip_c,
                loss_agg_mode=mode,
                loss_agg_norm=spec.loss_agg_norm,
                is_weights=is_weights[rows, :T] if is_weights is not None else None,
            )
            loss = out.loss
            parts = out.metrics()
            if ref_logp is not None:
                kl = kl_penalty(logp, ref_logp[rows, :T], algo.kl_estimator)  # (b, T)
                kl_loss = aggregate_loss(kl, m, mode, spec.loss_agg_norm)
                if not algo.kl_in_reward:
                    loss = loss + algo.kl_beta * kl_loss
                parts["actor/kl"] = kl_loss.item()
            entropy_loss = aggregate_loss(entropy, m, mode, spec.loss_agg_norm)
            if algo.entropy_coef > 0:
                loss = loss - algo.entropy_coef * entropy_loss
            parts["actor/entropy"] = entropy_loss.item()
            parts["actor/loss"] = loss.item()
            (loss * accumulation_weight(m, total_units, mode) * scale).backward()
            weight = accumulation_weight(m, local_units, mode).item()
            for key, value in parts.items():
                sums[key] = sums.get(key, 0.0) + value * weight
        sums["actor/grad_norm"] = self._apply_gradients()
        return sums

    def _join_pass_without_data(self) -> None:
        """This process's part of an optimisation pass when all its groups were filtered out:
        no units, no gradient, the same collectives as the others."""
        sum_over_processes(torch.zeros((), device=self.device), self.dist)
        self._apply_gradients()

    def _apply_gradients(self) -> float:
        """Average the accumulated gradients over processes (data parallel; a no-op alone), clip,
        step the optimiser; returns the gradient norm before clipping."""
        params = trainable_parameters(self.model)
        average_gradients(params, self.dist)
        max_norm = self.spec.optim.max_grad_norm if self.spec.optim.max_grad_norm is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm).item()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def _reward_metrics(self, groups: list[Group]) -> dict[str, float]:
        rewards = [r for grp in groups for r in grp.rewards]
        out = {
            "reward/mean": float(np.mean(rewards)),
            "reward/std": float(np.std(rewards)),
            "reward/frac_zero_std_groups": float(np.mean([not g.has_spread for g in groups])),
        }
        for name in self.rubric.names:
            out[f"reward/{name}/mean"] = float(np.mean([r.scores[name].score for g in groups for r in g.results]))
        return out

    def rollouts(self, groups: list[Group]) -> list[Rollout]:
        group_ids = step_group_ids([grp.prompt.id for grp in groups])
        return [
            Rollout(
                step=self.step_count,
                prompt_id=group_id,
                sample_index=j,
                prompt=grp.prompt.row.prompt,
                completion=gen.text,
                reward=grp.rewards[j],
                scores=res.scores,
                advantage=grp.advantages[j] if grp.advantages else 0.0,
                num_tokens=len(gen.token_ids),
                finish_reason=gen.finish_reason,
                logprobs=gen.logprobs,
                trained=id(grp) in self.last_trained,
            )
            for grp, group_id in zip(groups, group_ids, strict=True)
            for j, (gen, res) in enumerate(zip(grp.generations, grp.results, strict=True))
        ]
