"""Steps 4-8 of the algorithm on a step's trained groups (`PolicyUpdate`): the batch, the frozen logprobs,
the sampler/trainer gap and its correction, token rewards and advantages, the signed advantage weights,
then `ppo_epochs` optimisation passes with their token selections.

Every process runs it, one without groups included (`join_without_data`): the passes of a sharded model
are collective (`trainers.update.lockstep`)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch

from trainers.algorithms.advantages import ADVANTAGES
from trainers.algorithms.kl import kl_penalty
from trainers.algorithms.masked import masked_mean
from trainers.algorithms.mismatch import OFF_POLICY_CORRECTIONS, logprob_gap
from trainers.algorithms.policy_losses import POLICY_LOSSES
from trainers.algorithms.sample_weights import signed_advantage_weights
from trainers.algorithms.token_rewards import token_level_rewards
from trainers.models.loading import Reference
from trainers.scale.distributed import DistInfo
from trainers.spec import RunSpec
from trainers.update.batches import TokenBatch
from trainers.update.frozen import FrozenLogprobs
from trainers.update.groups import Group
from trainers.update.lockstep import Lockstep
from trainers.update.micro_batching import MicroBatching
from trainers.update.passes import OptimisationPass
from trainers.update.selection import PassTokens, Selected, StepSelector
from trainers.update.step_batch import StepBatch, build_step_batch
from trainers.update.teachers import Teachers


def advantage_metrics(advantages: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """`advantage/mean|std|min|max` over the valid tokens of a (B, T) advantage matrix."""
    valid = advantages[mask.bool()]
    return {
        "advantage/mean": masked_mean(advantages, mask).item(),
        "advantage/std": valid.std().item() if mask.sum() > 1 else 0.0,
        "advantage/min": valid.min().item(),
        "advantage/max": valid.max().item(),
    }


class PolicyUpdate:
    """The policy update of a run: its estimator, loss, token selector and optimisation pass."""

    def __init__(
        self, spec: RunSpec, model: torch.nn.Module, reference: Reference | None, optimizer: torch.optim.Optimizer,
        *, dist: DistInfo, lockstep: Lockstep, teachers: Teachers | None = None,
    ) -> None:  # fmt: skip
        self.spec = spec
        self.model = model
        self.reference = reference
        self.teachers = teachers  # on-policy distillation (trainers.update.teachers); None: no teacher
        self.lockstep = lockstep
        self.advantage_fn = ADVANTAGES.get(spec.algorithm.advantage_estimator)
        self.frozen = FrozenLogprobs(MicroBatching.of(spec.optim), lockstep, spec.rollout.temperature)
        self.optimise = OptimisationPass(spec, model, optimizer, POLICY_LOSSES.get(spec.algorithm.policy_loss),
                                         dist, lockstep)  # fmt: skip
        # Forking tokens, Clip-Cov, KL-Cov: tokens chosen over the whole step (trainers.update.selection).
        self.selector = (
            StepSelector(spec.algorithm, dist, lockstep.device, spec.optim.seed)
            if spec.algorithm.selects_tokens
            else None
        )

    def __call__(self, groups: list[Group], step: int, guidance: TokenBatch | None) -> dict[str, float]:
        """Steps 4-8 on the groups kept for training (step `step` + 1 of the run); sets each group's and
        each turn's advantages, returns the update's metrics."""
        algo = self.spec.algorithm
        batch = build_step_batch(groups, algo, pad_id=self.lockstep.pad_id, device=self.lockstep.device)
        started = time.perf_counter()
        old_logp, ref_logp, old_entropy = self.old_and_reference_logprobs(batch)
        old_ref_s = time.perf_counter() - started  # the no-grad passes' share of timing/train_s
        metrics, is_weights = self.sampler_mismatch(batch, old_logp)
        advantages = self.advantages(groups, batch, old_logp, ref_logp, metrics)
        # NSR / PSR / W-REINFORCE: positive and negative advantages weighed apart.
        advantages, loss_mask = signed_advantage_weights(
            advantages,
            batch.loss_mask,
            positive=algo.positive_advantage_weight,
            negative=algo.negative_advantage_weight,
        )
        batch = replace(batch, loss_mask=loss_mask)
        metrics |= self._passes(batch, advantages, old_logp, ref_logp, is_weights, old_entropy, step, guidance)
        return metrics | advantage_metrics(advantages, batch.mask) | {"timing/old_ref_s": old_ref_s}

    def join_without_data(self, step: int) -> None:
        """This process has no group to train on: it still joins the others' passes (collective)."""
        self.frozen(self.model, None)
        if self.reference is not None:
            with self.reference.context():
                self.frozen(self.reference.model, None)
        for k in range(self.spec.algorithm.ppo_epochs):
            self.select(None, None, None, k, step)
            self.optimise.join_without_data()

    def old_and_reference_logprobs(
        self, batch: StepBatch
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """5. (old, reference) logprobs, no grad, each only when something needs it, and the old pass's
        entropy when forking tokens are selected. With one pass the policy that sampled is the one being
        differentiated: the loss uses logp.detach(), and the engine/trainer gap alone is read off the
        training forward (dropout off)."""
        algo = self.spec.algorithm
        gap_from_training = batch.engine_logp is not None and algo.ppo_epochs == 1 and self.spec.model.disable_dropout
        need_old = (
            algo.ppo_epochs > 1
            or (algo.kl_in_reward and self.reference is not None)
            or algo.off_policy is not None
            or (batch.engine_logp is not None and not gap_from_training)
            or algo.selects_tokens  # the selection's first pass reads the old pass (with entropy for forking tokens)
            or self.teachers is not None  # the distillation signal compares the student's logprobs with the teacher's
        )
        # Without need_old this process still joins the others' old-logprob passes (a sharded model's
        # forwards are collective): with no batch it runs idle passes only, when another needs them.
        with_entropy = self.selector is not None and self.selector.needs_entropy
        old_logp, old_entropy = self.frozen(self.model, batch.tokens if need_old else None, with_entropy)
        ref_logp = None
        if self.reference is not None:
            with self.reference.context():
                ref_logp = self.frozen(self.reference.model, batch.tokens)[0]
        return old_logp, ref_logp, old_entropy

    def sampler_mismatch(
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

    def advantages(
        self, groups: list[Group], batch: StepBatch, old_logp: torch.Tensor | None, ref_logp: torch.Tensor | None,
        metrics: dict[str, float] | None = None,
    ) -> torch.Tensor:
        """6-7. Token rewards (the outcome on the last valid token, minus beta * KL per token when
        the KL is in the reward), then the advantage estimator, then with teachers their per-token term
        (its metrics into `metrics`); each group keeps its sequence means."""
        algo = self.spec.algorithm
        kl_reward = None
        if algo.kl_in_reward and ref_logp is not None:
            kl_reward = kl_penalty(old_logp, ref_logp, algo.kl_estimator)  # (B, T)
        token_rewards = token_level_rewards(batch.rewards, batch.mask, kl_reward, algo.kl_beta)  # (B, T)
        token_rewards = token_rewards + batch.turn_rewards  # each turn's environment reward at its end
        advantages, _returns = self.advantage_fn(
            token_rewards, batch.mask, batch.group_index, eps=algo.adv_eps, gamma=algo.gamma, turns=batch.turns
        )
        if self.teachers is not None:
            assert old_logp is not None
            advantages, distill = self.teachers.apply(groups, batch, old_logp, advantages)
            if metrics is not None:
                metrics |= distill
        sequence_advantages = iter(masked_mean(advantages, batch.mask, dim=-1).tolist())
        turn_advantages = iter(batch.turns.turn_means(advantages).tolist())  # (B, K)
        for grp in groups:
            grp.advantages = [next(sequence_advantages) for _ in grp.episodes]
            for ep in grp.episodes:
                for turn, value in zip(ep.turns, next(turn_advantages), strict=False):
                    turn.advantage = value
        return advantages

    def _passes(
        self, batch: StepBatch, advantages, old_logp, ref_logp, is_weights, old_entropy, step: int,
        guidance: TokenBatch | None,
    ) -> dict[str, float]:  # fmt: skip
        """8. `ppo_epochs` passes; their diagnostics averaged (a single pass reports its own)."""
        trainer_logp = torch.zeros_like(batch.mask) if batch.engine_logp is not None and old_logp is None else None
        passes = []
        for k in range(self.spec.algorithm.ppo_epochs):
            selected = self.select(batch.tokens, batch.loss_mask, advantages, k, step, old_logp, old_entropy)
            out = self.optimise(
                batch.tokens, batch.loss_mask, advantages, old_logp, ref_logp, is_weights, trainer_logp,
                selected=selected, guidance=guidance,
            )  # fmt: skip
            passes.append(out | (selected.metrics if selected is not None else {}))
        metrics = logprob_gap(batch.engine_logp, trainer_logp, batch.mask) if trainer_logp is not None else {}
        return metrics | {key: float(np.mean([p[key] for p in passes])) for key in passes[0]}

    def select(
        self, tokens: TokenBatch | None, loss_mask, advantages, pass_index: int, step: int, old_logp=None,
        old_entropy=None, row_ids=None,
    ) -> Selected | None:  # fmt: skip
        """The pass's token selection (trainers.update.selection), over every process: from the old pass's
        logprobs (and entropy) on the first pass, which ran at the same weights, from a no-grad pass of
        its own on later ones. None without a selection, or without data (collective all the same)."""
        if self.selector is None:
            return None
        if pass_index == 0:
            logp, entropy = old_logp, old_entropy
        else:
            logp, entropy = self.frozen(self.model, tokens, self.selector.needs_entropy)
        found = None
        if tokens is not None:
            assert logp is not None and old_logp is not None
            found = PassTokens(logp, entropy, old_logp, advantages, loss_mask, row_ids)
        return self.selector.select(found, step, pass_index)
