"""Presets: named bundles of AlgorithmSpec values (GRPO, Dr. GRPO, DAPO, GSPO, RLOO, REINFORCE++...), not code paths."""

from __future__ import annotations

import copy
from typing import Any

# Presets: named bundles of AlgorithmSpec values. Everything not named keeps its default.
PRESETS: dict[str, dict[str, Any]] = {
    "grpo": {  # DeepSeekMath, arXiv:2402.03300
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "seq-mean-token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.04,
        "kl_estimator": "k3",
    },
    "dr_grpo": {  # Understanding R1-Zero-Like Training, arXiv:2503.20783
        "advantage_estimator": "dr_grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "seq-mean-token-sum-norm",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.0,
    },
    "dapo": {  # arXiv:2503.14476
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.28,
        "kl_beta": 0.0,
        "dynamic_sampling": True,
        "overlong_penalty": True,
    },
    "gspo": {  # arXiv:2507.18071
        "advantage_estimator": "grpo",
        "policy_loss": "gspo",
        "loss_agg_mode": "seq-mean-token-mean",
        "clip_ratio_low": 3e-4,
        "clip_ratio_high": 4e-4,
        "kl_beta": 0.0,
    },
    "rloo": {  # Back to Basics, arXiv:2402.14740
        "advantage_estimator": "rloo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "kl_beta": 0.05,
        "kl_estimator": "k1",
        "kl_in_reward": True,
    },
    "reinforce_pp": {  # arXiv:2501.03262
        "advantage_estimator": "reinforce_pp",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "kl_beta": 0.01,
        "kl_estimator": "k1",
        "kl_in_reward": True,
    },
    "reinforce_pp_baseline": {
        "advantage_estimator": "reinforce_pp_baseline",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "kl_beta": 0.01,
        "kl_estimator": "k3",
        "kl_in_reward": False,
    },
    "lite_ppo": {  # Tricks or Traps? arXiv:2508.08221: group-mean + batch-std, token-level loss
        "advantage_estimator": "group_mean_batch_std",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "kl_beta": 0.0,
    },
    # ReTool, arXiv:2504.11536, as verl's recipe/retool (run_qwen2_7b_dapo.sh): code-interpreter RL on
    # the outcome only (trajectory-level GRPO; interpreter output is masked from the loss, as every
    # observation is here), DAPO's clip-higher and token-mean loss, no KL. The paper samples 16 per prompt.
    "retool": {
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.28,
        "kl_beta": 0.0,
        "overlong_filter": True,
    },
    # Search-R1, arXiv:2503.09516 (its GRPO runs): retrieved passages masked from the loss (every
    # observation is here), clip 0.2, a small k3 KL loss (0.001). The paper samples 5 per prompt.
    "search_agent": {
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.001,
        "kl_estimator": "k3",
        "kl_in_reward": False,
    },
    # Turn-level credit, each as its authors' code and scripts run it (the estimators' docstrings in
    # trainers/algorithms/turn_advantages.py say what differs). GiGPO, verl-agent's examples/gigpo_trainer:
    # every script trains with gamma 0.95, omega 1, a k3 ("low_var_kl") KL loss at 0.01, token-mean, and the
    # trainer's episode statistics over step rows; WebShop, Sokoban and the card games set mode=mean_norm
    # (also the config default): "gigpo"; ALFWorld and search set mean_std_norm: "gigpo_std".
    "gigpo": {
        "advantage_estimator": "gigpo",
        "gigpo_episode_stats": "step",
        "gigpo_norm": "mean",
        "step_advantage_weight": 1.0,
        "gamma": 0.95,
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.01,
        "kl_estimator": "k3",
        "entropy_coef": 0.001,
    },
    "gigpo_std": {
        "advantage_estimator": "gigpo",
        "gigpo_episode_stats": "step",
        "gigpo_norm": "mean_std",
        "step_advantage_weight": 1.0,
        "gamma": 0.95,
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.01,
        "kl_estimator": "k3",
        "entropy_coef": 0.001,
    },
    # MT-GRPO, the authors' MTGRPOEnvTrainer and scripts/run_mt_grpo.sh: epsilon 1e-4, no-tool episodes on
    # the combined advantage, turn coefficient 1, token-mean over the batch, clip 0.2, beta 0, two passes.
    "mt_grpo": {
        "advantage_estimator": "mt_grpo",
        "adv_eps": 1e-4,
        "mt_grpo_no_tool": "combined",
        "turn_advantage_weight": 1.0,
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.0,
        "ppo_epochs": 2,
    },
    # IGPO, the authors' train.sh (Feb 2026 release): log-probability gains, separate normalisation,
    # gamma 1, a k3 KL loss at 0.001, entropy 0.001; their actor's loss is seq-mean-token-sum.
    "igpo": {
        "advantage_estimator": "igpo",
        "info_gain_weight": 1.0,
        "info_gain_type": "log_prob",
        "igpo_norm": "separate",
        "gamma": 1.0,
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "seq-mean-token-sum",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.001,
        "kl_estimator": "k3",
        "entropy_coef": 0.001,
    },
    # Positive and negative samples weighed apart (arXiv:2506.01347), as the authors' RLVR-Decomposed scripts:
    # the outcome as the advantage (+1 / -1, no baseline), no KL; NSR trains on the wrong samples alone,
    # PSR on the correct ones, W-REINFORCE on both with lambda = 0.1 on the correct ones.
    "nsr": {
        "advantage_estimator": "reinforce_signed",
        "positive_advantage_weight": 0.0,
        "negative_advantage_weight": 1.0,
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.0,
    },
    "psr": {
        "advantage_estimator": "reinforce_signed",
        "positive_advantage_weight": 1.0,
        "negative_advantage_weight": 0.0,
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.0,
    },
    "w_reinforce": {
        "advantage_estimator": "reinforce_signed",
        "positive_advantage_weight": 0.1,
        "negative_advantage_weight": 1.0,
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.0,
    },
    # Beyond the 80/20 Rule, arXiv:2506.01939, as the authors' run_only_top20_high_entropy_tokens_dapo script:
    # DAPO (clip 0.2 / 0.28, token-mean, dynamic sampling, soft overlong penalty, verl's dual-clip at c = 10)
    # with the policy gradient on the top 20 % of tokens by entropy.
    "forking_tokens": {
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.28,
        "dual_clip_c": 10.0,
        "kl_beta": 0.0,
        "dynamic_sampling": True,
        "overlong_penalty": True,
        "entropy_top_ratio": 0.2,
    },
    # The Entropy Mechanism of RL, arXiv:2505.22617, as PRIME-RL/Entropy-Mechanism-of-RL's recipe/dapo
    # 7b_clip_cov.sh and 7b_kl_cov.sh: GRPO advantages, token-mean, dynamic sampling, no KL, no overlong
    # penalty; Clip-Cov at r = 2e-4 in (1, 5) with the PPO clip opened to [0, 2], KL-Cov at k = 2e-3, beta 1.
    "clip_cov": {
        "advantage_estimator": "grpo",
        "policy_loss": "clip_cov",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 1.0,
        "clip_ratio_high": 1.0,
        "clip_cov_ratio": 2e-4,
        "clip_cov_lb": 1.0,
        "clip_cov_ub": 5.0,
        "kl_beta": 0.0,
        "dynamic_sampling": True,
    },
    "kl_cov": {
        "advantage_estimator": "grpo",
        "policy_loss": "kl_cov",
        "loss_agg_mode": "token-mean",
        "kl_cov_ratio": 2e-3,
        "kl_cov_coef": 1.0,
        "kl_beta": 0.0,
        "dynamic_sampling": True,
    },
    # Off-policy guidance: LUFFY's (arXiv:2504.14945) policy shaping gamma = 0.1 on an SFT term over the reference
    # solutions of the prompts whose samples all failed (ReLIFT's choice of prompts, arXiv:2506.07527);
    # LUFFY's scripts: no KL, entropy bonus 0.001.
    "luffy_guidance": {
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.0,
        "entropy_coef": 0.001,
        "guidance_coef": 1.0,
        "guidance_shaping": 0.1,
    },
    # On-policy distillation (Thinking Machines' post and Tinker's cookbook, TRL's DistillationTrainer at beta 1):
    # the per-token reverse KL to the run's teacher (its teacher section) is the whole advantage, undiscounted and
    # unnormalised, coefficient 1; the rubric is scored and reported, not trained on; one on-policy pass, no KL
    # to a reference (the teacher is the anchor).
    "on_policy_distillation": {
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.0,
        "ppo_epochs": 1,
        "distill_signal": "reverse_kl",
        "distill_coef": 1.0,
        "reward_advantage_weight": 0.0,
    },
}


# Each description ends with how the preset differs from verl's actor defaults (token-mean loss,
# clip 0.2/0.2, dual-clip c = 3 always on, no KL; a KL loss is k3 at 0.001), so a team comparing
# with a verl run knows what to set. No preset turns dual-clip on (algorithm.dual_clip_c).
PRESET_DESCRIPTIONS: dict[str, str] = {
    "grpo": "GRPO (DeepSeekMath): group mean/std advantages, clipped ratio, k3 KL loss. "
    "vs verl: seq-mean-token-mean loss, KL loss beta 0.04 (the paper's), no dual-clip.",
    "dr_grpo": "Dr. GRPO: no std division, constant-normalised token sum, no KL. "
    "vs verl: seq-mean-token-sum-norm loss, no dual-clip.",
    "dapo": "DAPO: clip-higher, token-mean loss, dynamic sampling, soft overlong punishment. "
    "vs verl: clip high 0.28, no dual-clip.",
    "gspo": "GSPO: sequence-level importance ratio with tight clipping. "
    "vs verl: seq-mean-token-mean loss, clip 0.0003/0.0004, no dual-clip.",
    "rloo": "RLOO: leave-one-out baseline, KL folded into the reward. "
    "vs verl: k1 KL in the reward (beta 0.05), no dual-clip.",
    "reinforce_pp": "REINFORCE++: batch-whitened token returns with KL in the reward. "
    "vs verl: k1 KL in the reward (beta 0.01), no dual-clip.",
    "reinforce_pp_baseline": "REINFORCE++-baseline: group-mean baseline, batch-std normalisation. "
    "vs verl: k3 KL loss beta 0.01, no dual-clip.",
    "lite_ppo": "Lite PPO: group-mean advantages over the batch std of the rewards, token-level loss. "
    "vs verl: no dual-clip.",
    "retool": "ReTool: tool-integrated (code interpreter) RL on the final answer, tool output never trained on; "
    "clip-higher, token-mean loss, no KL, truncated episodes left out of the loss. "
    "vs verl: clip high 0.28, no dual-clip (verl's ReTool recipe sets c = 10).",
    "search_agent": "Search-R1: a search agent trained with GRPO on the final answer, retrieved text never trained "
    "on; clip 0.2, small KL loss. vs verl: k3 KL loss beta 0.001, no dual-clip.",
    "gigpo": "GiGPO as verl-agent's WebShop/Sokoban scripts and config default: episode statistics over step rows, "
    "mean_norm (centred, no std), gamma 0.95, omega 1. vs verl: k3 KL loss beta 0.01, no dual-clip.",
    "gigpo_std": "GiGPO as verl-agent's ALFWorld and search scripts: as gigpo with mean_std_norm. "
    "vs verl: k3 KL loss beta 0.01, no dual-clip.",
    "mt_grpo": "MT-GRPO as the authors' trainer: epsilon 1e-4, an episode that calls no tool gets the normalised "
    "sum of turn and outcome rewards, two passes per batch, no KL. vs verl: no dual-clip.",
    "igpo": "IGPO as the authors' train.sh: information gain as a log-probability gain, gains and outcomes "
    "normalised apart, summed over later turns (gamma 1). vs verl: seq-mean-token-sum loss, k3 KL loss beta 0.001, "
    "no dual-clip.",
    "nsr": "NSR (negative-sample reinforcement): REINFORCE on +-1 outcomes trained on the wrong samples only, "
    "which lowers their likelihood and keeps pass@k high (arXiv:2506.01347). vs verl: no dual-clip.",
    "psr": "PSR (positive-sample reinforcement): REINFORCE on +-1 outcomes trained on the correct samples only "
    "(arXiv:2506.01347). vs verl: no dual-clip.",
    "w_reinforce": "W-REINFORCE: REINFORCE on +-1 outcomes with the correct samples weighted 0.1 and the wrong ones 1 "
    "(arXiv:2506.01347). vs verl: no dual-clip.",
    "forking_tokens": "80/20 forking tokens: DAPO with the policy gradient on the top 20 % of the step's tokens by "
    "entropy (arXiv:2506.01939). vs verl: clip high 0.28, dual-clip c = 10 (the authors' script).",
    "clip_cov": "Clip-Cov: the gradient cut on a random 0.02 % of the tokens whose log-prob/advantage covariance "
    "lies in (1, 5), against entropy collapse (arXiv:2505.22617). vs verl: clip low 1 and clip high 1 (the "
    "authors' script), no dual-clip.",
    "kl_cov": "KL-Cov: |log-ratio| penalty (beta 1) on the 0.2 % of tokens with the largest log-prob/advantage "
    "covariance, unclipped ratio (arXiv:2505.22617). vs verl: no dual-clip.",
    "on_policy_distillation": "On-policy distillation: the student samples, the teacher section's models score each "
    "sampled token, and the advantage is minus the per-token reverse KL (log pi_student - log pi_teacher); the "
    "rubric is reported only. Needs a teacher section. vs verl: no dual-clip.",
    "luffy_guidance": "LUFFY-style guidance: GRPO plus an SFT term, with LUFFY's policy shaping (gamma 0.1), on the "
    "reference solutions of prompts whose samples all failed (arXiv:2504.14945, 2506.07527). vs verl: no dual-clip.",
}


def preset_values(name: str) -> dict[str, Any]:
    """AlgorithmSpec values of a preset (a fresh copy)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    return {**copy.deepcopy(PRESETS[name]), "preset": name}


def apply_preset(config: dict[str, Any], name: str) -> dict[str, Any]:
    """A copy of a RunSpec config dict whose algorithm section starts from the preset;
    keys the config sets explicitly in `algorithm` win over the preset."""
    out = copy.deepcopy(config)
    out["algorithm"] = {**preset_values(name), **out.get("algorithm", {})}
    return out
