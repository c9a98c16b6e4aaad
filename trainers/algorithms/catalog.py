"""Names and one-line descriptions of every algorithm registry entry.

This module imports without torch so the studio can render choices and validate
configs. The registries themselves (`advantages.py`, `policy_losses.py`, ...) hold
the functions; `tests/trainers/algorithms/test_catalog.py` checks that both list the same names.
"""

ADVANTAGE_ESTIMATORS: dict[str, str] = {
    "grpo": "Group mean/std normalisation (DeepSeekMath GRPO): (r - mean_g) / (std_g + eps).",
    "dr_grpo": "Group mean only, no std division (Dr. GRPO, arXiv:2503.20783).",
    "rloo": "Leave-one-out baseline: r_i - mean of the other samples of the group (RLOO).",
    "reinforce_pp": "REINFORCE++: token-level returns, whitened over the whole batch (arXiv:2501.03262).",
    "reinforce_pp_baseline": "Group mean subtracted, then scaled by the token-level batch std of the centred scores "
    "(REINFORCE++-baseline, as verl).",
    "group_mean_batch_std": "Group mean subtracted, divided by the batch std of the sequence rewards (Lite PPO, "
    "arXiv:2508.08221).",
    "reinforce_signed": "REINFORCE on +-1 outcomes, no baseline (NSR / PSR / W-REINFORCE, arXiv:2506.01347): "
    "A = 2r - 1, so a correct sample (r = 1) gets +1 and a wrong one (r = 0) -1; weigh the two with "
    "positive_advantage_weight and negative_advantage_weight.",
    "mt_grpo": "Turn-level credit (MT-GRPO, arXiv:2505.11821): group-normalised outcome plus, on each turn's tokens, "
    "the group-normalised rewards of that turn and the turns after it (x turn_advantage_weight).",
    "gigpo": "GiGPO (arXiv:2505.10978): group-normalised episode return plus step returns normalised among the "
    "group's turns taken from the same environment state (x step_advantage_weight).",
    "igpo": "IGPO (arXiv:2510.14967): each turn's reward (information gain; the answer turn's outcome) normalised "
    "within the group, then summed over this and later turns with discount gamma.",
}

POLICY_LOSSES: dict[str, str] = {
    "ppo_clip": "PPO clipped ratio with separate low/high clip (clip-higher) and optional dual-clip.",
    "gspo": "GSPO: sequence-level, length-normalised importance ratio, clipped (arXiv:2507.18071).",
    "vanilla_pg": "Plain policy gradient: -A * log pi (no ratio, no clip).",
    "clip_cov": "Clip-Cov (arXiv:2505.22617): PPO clip, and the gradient cut on a random clip_cov_ratio of the "
    "step's tokens whose covariance of log pi and advantage lies in (clip_cov_lb, clip_cov_ub).",
    "kl_cov": "KL-Cov (arXiv:2505.22617): unclipped -A * ratio, plus kl_cov_coef * |log pi - log pi_old| on the "
    "kl_cov_ratio of the step's tokens with the largest covariance of log pi and advantage.",
}

OFF_POLICY_CORRECTIONS: dict[str, str] = {
    "decoupled": "Decoupled PPO (AReaL): each token's loss times pi_prox / pi_behav, untruncated; the clip keeps "
    "the update near the trainer's weights, the weight corrects for the sampler's (older) ones.",
    "tis": "Token-level truncated importance sampling: weight min(pi_prox / pi_behav, high).",
    "seq_tis": "Sequence-level truncated importance sampling: each sequence's likelihood ratio, truncated at high.",
    "mis": "Token-level masked importance sampling: the ratio where it is at most high, tokens above it dropped.",
    "seq_mis": "Sequence-level masked importance sampling: the sequence's likelihood ratio where at most high, "
    "the whole sequence dropped above it.",
    "icepop": "IcePop: the token ratio where it lies in [low, high], tokens outside the band dropped.",
    "seq_icepop": "IcePop's band on each sequence's geometric-mean ratio: sequences outside [low, high] dropped, "
    "the others weighted by it.",
}

LOSS_AGG_MODES: dict[str, str] = {
    "token-mean": "Mean over every valid token of the batch (DAPO).",
    "token-sum": "Sum over every valid token of the batch: grows with the batch (verl's token-sum).",
    "seq-mean-token-mean": "Mean over tokens of each sequence, then over sequences (original GRPO).",
    "seq-mean-token-sum": "Sum over tokens of each sequence, then mean over sequences.",
    "seq-mean-token-sum-norm": "Sum over tokens divided by a constant (max response length), Dr. GRPO.",
}

KL_ESTIMATORS: dict[str, str] = {
    "k1": "log(pi/pi_ref): unbiased estimate, high variance. In the reward only: as a loss term its expected "
    "gradient is zero on-policy (it adds noise, not regularisation), so kl_in_reward=false refuses it.",
    "k2": "0.5 * (log(pi/pi_ref))^2.",
    "k3": "pi_ref/pi - log(pi_ref/pi) - 1: unbiased, low variance, always >= 0 (Schulman).",
    "abs": "|log(pi/pi_ref)|: biased, >= 0 (verl's 'abs').",
}

DISTILL_SIGNALS: dict[str, str] = {
    "reverse_kl": "Per-token reverse KL of the student's sampled token against the teacher, log pi_student - "
    "log pi_teacher (on-policy distillation: GKD, Thinking Machines, Tinker, TRL); the advantage gains "
    "-distill_coef times it on that token.",
    "reverse_kl_centered": "The reverse KL less its mean over the step's scored tokens (a constant baseline: the "
    "same expected gradient, less variance where the student is far from its teacher and every token's KL is "
    "large); the metrics still show the plain reverse KL.",
}
