"""Step 8 of the algorithm, one optimisation pass: the batch in micro-batches with gradient accumulation
(policy loss + KL term - entropy bonus, and the guidance term), then one optimiser step.

Sharded, the accumulated gradient is reduced over the processes once, in the last backward, where that
costs no memory (replicate; hybrid across nodes: `trainers.scale.sharding.ReduceOnLast`).

Each micro-batch's loss is weighted by its share of the aggregation units (tokens or sequences), so the
accumulated gradient is that of the whole batch's loss. Under several processes the loss is the whole
step's over every process: units are counted over all of them, and each process's share is scaled by the
process count, which averaging gradients divides out (the loss equals the single-process loss on the
same batch).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainers.algorithms.aggregation import accumulation_weight, aggregate_loss, aggregation_units
from trainers.algorithms.guidance import guidance_token_loss, loss_share
from trainers.algorithms.kl import kl_penalty
from trainers.algorithms.masked import masked_sum
from trainers.algorithms.policy_losses import PolicyLossFn
from trainers.algorithms.token_selection import TokenSelection
from trainers.scale.distributed import DistInfo, sum_over_processes
from trainers.scale.sharding import ReduceOnLast
from trainers.spec import RunSpec
from trainers.update.batches import TokenBatch
from trainers.update.lockstep import Lockstep
from trainers.update.logprobs import token_logprobs
from trainers.update.micro_batching import MicroBatching
from trainers.update.optimizer import apply_gradients
from trainers.update.precision import autocast
from trainers.update.selection import Selected


@dataclass(frozen=True)
class OptimisationPass:
    spec: RunSpec
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    policy_loss_fn: PolicyLossFn
    dist: DistInfo
    lockstep: Lockstep

    def __call__(
        self, batch, loss_mask, advantages, old_logp, ref_logp, is_weights, trainer_logp=None, *,
        selected: Selected | None = None, guidance: TokenBatch | None = None,
    ) -> dict[str, float]:  # fmt: skip
        """One pass over `batch` (a TokenBatch), then one optimiser step; returns this process's weighted
        means of the loss's parts and the gradient norm. The forward pass's logprobs (before the step) are
        written into `trainer_logp` (B, T) when it is given.

        `selected` (trainers.update.selection): the policy gradient's own mask (forking tokens; the KL
        and entropy terms keep `loss_mask`) and the policy loss's token selection (Clip-Cov, KL-Cov).
        `guidance`: reference-solution rows whose guidance term (algorithm.guidance_coef times the
        token mean over every process's rows) joins the same gradient."""
        spec, algo, device = self.spec, self.spec.algorithm, self.lockstep.device
        mode = algo.loss_agg_mode
        pg_mask = selected.pg_mask if selected is not None else loss_mask
        # One reduction: the loss's units, the policy gradient's (forking tokens), the guidance tokens.
        guidance_tokens = guidance.completion_mask.sum() if guidance is not None else torch.zeros((), device=device)
        local = torch.stack(
            [aggregation_units(loss_mask, mode), aggregation_units(pg_mask, mode), guidance_tokens.to(device)]
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
        idle = self.lockstep.idle_passes(len(splits) + len(guidance_splits))  # agreed before the first forward
        guided = len(guidance_splits) if algo.guidance_coef > 0 else 0
        reduction = ReduceOnLast(self.model, len(splits) + guided + idle)  # the gradients reduced on the last
        for rows in splits:
            mb = batch.select(rows)
            T = mb.completion_mask.shape[1]
            m = loss_mask[rows, :T]
            pm = pg_mask[rows, :T]
            selection: TokenSelection | None = None
            if selected is not None and selected.selection is not None:
                selection = selected.selection.rows(rows, T)
            with autocast(self.model, self.lockstep.precision):  # the loss below is float32 either way
                logp, entropy = token_logprobs(
                    self.model,
                    mb,
                    temperature=spec.rollout.temperature,
                    with_entropy=True,
                    entropy_grad=algo.entropy_coef > 0,
                    chunk_tokens=self.lockstep.chunk_tokens,
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
            reduction.next_pass()
            ((out.loss * pg_weight + rest * accumulation_weight(m, total_units, mode)) * scale).backward()
            weight = accumulation_weight(m, local_units, mode).item()
            for key, value in parts.items():
                sums[key] = sums.get(key, 0.0) + value * weight
        if guided:
            sums |= self._guidance(guidance, guidance_splits, total_guidance, scale, sums.get("actor/loss", 0.0),
                                   reduction)  # fmt: skip
        for _ in range(idle):
            reduction.next_pass()
            self.lockstep.idle_pass(self.model, grad=True)
        sums["actor/grad_norm"] = apply_gradients(self.model, self.optimizer, spec.optim.max_grad_norm)
        return sums

    def _guidance(
        self, guidance: TokenBatch | None, splits: list, total_tokens: torch.Tensor, scale: int, policy_loss: float,
        reduction: ReduceOnLast,
    ) -> dict[str, float]:  # fmt: skip
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
            with autocast(self.model, self.lockstep.precision):
                logp, _ = token_logprobs(
                    self.model, mb, temperature=spec.rollout.temperature, chunk_tokens=self.lockstep.chunk_tokens,
                    pack_tokens=pack_tokens,
                )  # fmt: skip
            part = masked_sum(guidance_token_loss(logp, mask, algo.guidance_shaping), mask)
            reduction.next_pass()
            (algo.guidance_coef * part / total_tokens * scale).backward()
            loss_sum += part.item()
            tokens += mask.sum().item()
        sft_loss = loss_sum / tokens if tokens else 0.0
        return {
            "guidance/sft_loss": sft_loss,
            "guidance/loss_share": loss_share(algo.guidance_coef * sft_loss, policy_loss),
        }

    def join_without_data(self) -> None:
        """This process's part of a pass when all its groups were filtered out: no units and a gradient of
        zero, through the same collectives as the others."""
        sum_over_processes(torch.zeros(3, device=self.lockstep.device), self.dist)  # as __call__'s one reduction
        idle = self.lockstep.idle_passes(0)
        reduction = ReduceOnLast(self.model, idle)
        for _ in range(idle):
            reduction.next_pass()
            self.lockstep.idle_pass(self.model, grad=True)
        apply_gradients(self.model, self.optimizer, self.spec.optim.max_grad_norm)
