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
