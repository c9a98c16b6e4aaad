"""GRPO-family algorithm parts: registries of small, pure tensor-in/tensor-out functions.

Import the submodule you need; this package imports nothing (so `catalog` stays importable
without torch). The registries are `trainers.registry.Registry` instances.

- `catalog`        names + one-line help of every registry entry (torch-free; the studio reads it)
- `advantages`     `ADVANTAGES`: fn(token_rewards, mask, group_index, *, eps, gamma, turns=None)
                   -> (advantages, returns)
- `turn_advantages` the turn-aware estimators `mt_grpo`, `gigpo` and `igpo` (registered by `advantages`)
- `returns`        `sequence_scores`, `discounted_returns`: what every estimator starts from
- `turns`          `TurnLayout`: turn boundaries, turn rewards, states and tool turns of a batch; `CreditModes`
- `info_gain`      IGPO: the policy's belief in the reference answer before and after each turn
- `policy_losses`  `POLICY_LOSSES`: fn(logp, old_logp, advantages, mask, *, clip_ratio_low, clip_ratio_high,
                   dual_clip_c, loss_agg_mode, loss_agg_norm, is_weights=None) -> `PolicyLossOutput`
- `aggregation`    `LOSS_AGGREGATIONS`, `aggregate_loss(loss_mat, mask, mode, norm)`, `aggregation_units(mask, mode)`
- `kl`             `KL_ESTIMATORS`: fn(logp, ref_logp) -> (B, T); `kl_penalty(logp, ref_logp, estimator)`
- `filters`        `groups_with_reward_spread`, `overlong_loss_mask`, `overlong_soft_penalty` (DAPO)
- `mismatch`       the sampler/trainer logprob gap and its truncated importance weights (TIS)
- `sample_weights` NSR / PSR / W-REINFORCE: the +-1 estimator and `signed_advantage_weights`
- `token_selection` forking tokens, Clip-Cov, KL-Cov: `TokenSelection` and the batch-level selections
- `guidance`       the SFT term on reference solutions of failed prompts (LUFFY / ReLIFT style)
- `distillation`   `DISTILL_SIGNALS`: fn(student_logp, teacher_logp, mask) -> (B, T), on-policy distillation's
                   per-token term; `distilled_advantages`, `teacher_mean` (several teachers of one row)
- `masked`         `masked_sum`, `masked_mean`, `masked_var`, `masked_whiten`, `zero_masked`
- `groups`         per-group statistics broadcast to samples, groups keyed by an id or a key row:
                   `group_size`, `group_mean`, `group_std`, `group_normalise`, `group_has_spread`
"""
