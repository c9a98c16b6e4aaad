"""The GRPO family's knobs: group size, advantage estimator, policy loss, clipping, KL and filters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from trainers.algorithms.catalog import (
    ADVANTAGE_ESTIMATORS,
    DISTILL_SIGNALS,
    KL_ESTIMATORS,
    LOSS_AGG_MODES,
    OFF_POLICY_CORRECTIONS,
    POLICY_LOSSES,
)
from trainers.spec.base import Section, choice, field_error
from trainers.spec.presets import PRESETS


@dataclass(frozen=True)
class OffPolicyCorrection:
    """The correction a run applies, resolved once (`AlgorithmSpec.off_policy`): an entry of
    trainers.algorithms.mismatch.OFF_POLICY_CORRECTIONS and its band."""

    name: str
    low: float
    high: float


class AlgorithmSpec(Section):
    """The RL method: group size, advantage estimator, policy loss, KL, clipping, sampling filters."""

    preset: str | None = Field(None, description="Preset these values started from (informational).")
    group_size: int = Field(8, ge=2, le=1024, description="Completions sampled per prompt (G).")
    advantage_estimator: str = Field("grpo", description="How rewards become advantages.")
    adv_eps: float = Field(
        1e-6,
        gt=0,
        description="Added to the std in normalisation. MT-GRPO's authors hard-code 1e-4 (the mt_grpo preset).",
    )
    gamma: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Discount: of token-level returns (REINFORCE++), of step returns over turns (gigpo) and of the "
        "normalised turn rewards summed over later turns (igpo).",
    )
    policy_loss: str = Field("ppo_clip", description="Surrogate objective.")
    clip_ratio_low: float = Field(0.2, ge=0, le=10, description="Ratio lower clip: 1 - clip_ratio_low.")
    clip_ratio_high: float = Field(
        0.2, ge=0, le=10, description="Ratio upper clip: 1 + clip_ratio_high (clip-higher, DAPO)."
    )
    dual_clip_c: float | None = Field(
        None, gt=1, description="Dual-clip bound for negative advantages (e.g. 3.0); off when empty."
    )
    loss_agg_mode: str = Field("seq-mean-token-mean", description="How per-token losses are reduced.")
    loss_agg_norm: int | None = Field(
        None, ge=1, description="Constant for seq-mean-token-sum-norm; defaults to rollout.max_new_tokens."
    )
    kl_beta: float = Field(0.0, ge=0, le=10, description="KL coefficient; 0 means no reference model is loaded.")
    kl_estimator: str = Field("k3", description="KL estimator.")
    kl_in_reward: bool = Field(False, description="Subtract beta*KL from token rewards instead of adding a loss term.")
    entropy_coef: float = Field(0.0, ge=0, le=1, description="Entropy bonus coefficient.")
    ppo_epochs: int = Field(1, ge=1, le=16, description="Optimisation passes over each batch of rollouts.")
    dynamic_sampling: bool = Field(False, description="DAPO: drop groups whose rewards all agree, sample more prompts.")
    dynamic_sampling_max_rounds: int = Field(4, ge=1, le=64, description="Cap on extra generation rounds per step.")
    overlong_filter: bool = Field(False, description="Mask the loss of truncated completions.")
    overlong_penalty: bool = Field(False, description="DAPO soft overlong punishment.")
    overlong_buffer: int = Field(16, ge=1, description="Tokens before max_new_tokens where the soft penalty ramps up.")
    overlong_penalty_factor: float = Field(1.0, ge=0, description="Penalty at max_new_tokens.")
    turn_advantage_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="mt_grpo: weight of the turn-level advantages (this turn's and later turns' normalised turn "
        "rewards) added to the outcome advantage; 0 is GRPO on the outcome.",
    )
    step_advantage_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="gigpo: weight omega of the step advantage (step returns normalised among turns taken from the "
        "same environment state) added to the episode advantage; 0 is GRPO.",
    )
    info_gain_weight: float = Field(
        0.0,
        ge=0,
        le=100,
        description="IGPO: add to each turn's reward (but the last) this times the turn's information gain about "
        "the reference answer, measured as info_gain_type says (one extra forward pass per turn); 0 is off.",
    )
    info_gain_answer_field: str = Field(
        "answer", min_length=1, description="IGPO: the dataset field holding each row's reference answer."
    )
    info_gain_type: Literal["log_prob", "prob"] = Field(
        "log_prob",
        description="IGPO: log_prob: the gain in the policy's mean token log-probability of the answer over the turn "
        "(the authors' training script, their log_prob_diff); prob: the gain in its probability, exp of that mean "
        "(the paper's equation, their prob_diff).",
    )
    igpo_norm: Literal["separate", "joint"] = Field(
        "separate",
        description="igpo: separate: information gains and outcomes normalised apart within the group (the authors' "
        "training script); joint: all of a group's turn rewards normalised together (the paper's equation).",
    )
    gigpo_episode_stats: Literal["trajectory", "step"] = Field(
        "trajectory",
        description="gigpo: the episode advantage's group mean and std over one value per episode (trajectory, the "
        "paper's equation) or one per turn, so longer episodes weigh more (step, verl-agent's trainer).",
    )
    gigpo_norm: Literal["mean_std", "mean"] = Field(
        "mean_std",
        description="gigpo: mean_std: episode and step advantages are (x - mean) / (std + eps) (verl-agent's "
        "mean_std_norm); mean: x - mean only (its mean_norm, the config default).",
    )
    mt_grpo_no_tool: Literal["turns", "combined"] = Field(
        "turns",
        description="mt_grpo: an episode that called no tool is credited like any other (turns), or gets the group-"
        "normalised sum of its outcome and turn rewards on every token (combined, the authors' trainer). In an "
        "environment without tools, combined makes mt_grpo GRPO on that sum.",
    )
    tis_cap: float | None = Field(
        None, gt=0, description="Truncated importance-sampling cap for engine/trainer logprob mismatch (vLLM)."
    )
    correction: str | None = Field(
        None,
        description="Off-policy correction: how tokens are reweighted when the policy that sampled them (the engine; "
        "in an asynchronous run, weights up to rollout.asynchronous.max_staleness updates old) is not the one the "
        "step starts from. 'decoupled' is decoupled PPO (the clip against the trainer's weights, times their ratio "
        "to the sampler's); tis / mis / icepop truncate or drop tokens whose ratio is far from 1, seq_* do it per "
        "sequence. Empty: none (tis_cap alone keeps its meaning).",
    )
    correction_low: float = Field(
        0.5, gt=0, le=1, description="icepop, seq_icepop: tokens (sequences) whose ratio is below this are dropped."
    )
    correction_high: float = Field(
        2.0, ge=1, le=1000,
        description="tis, seq_tis: the ratio is truncated to this; mis, seq_mis, icepop, seq_icepop: above it the "
        "token (sequence) is dropped. Not used by 'decoupled'.",
    )  # fmt: skip
    # Objectives of recent papers (trainers.algorithms.sample_weights, token_selection, guidance).
    positive_advantage_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="W-REINFORCE's lambda: positive advantages are multiplied by this; 0 leaves those tokens out of "
        "the loss (NSR: learn from wrong samples only). The w_reinforce preset sets 0.1 (arXiv:2506.01347).",
    )
    negative_advantage_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Negative advantages are multiplied by this; 0 leaves those tokens out of the loss (PSR: learn "
        "from correct samples only).",
    )
    entropy_top_ratio: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Forking tokens (Beyond the 80/20 Rule, arXiv:2506.01939): the policy gradient only on this "
        "share of the step's tokens with the highest entropy (0.2: the top 20 %, over every process); the KL and "
        "entropy terms keep every token. Costs one no-grad forward pass per update. Empty: every token.",
    )
    clip_cov_ratio: float = Field(
        2e-4, gt=0, le=1, description="clip_cov: share of the step's tokens whose gradient is cut (the paper's r)."
    )
    clip_cov_lb: float = Field(
        1.0, description="clip_cov: a token is a candidate when its covariance lies above this ..."
    )
    clip_cov_ub: float = Field(5.0, description="clip_cov: ... and below this.")
    kl_cov_ratio: float = Field(
        2e-3,
        gt=0,
        le=1,
        description="kl_cov: share of the step's tokens, those of largest covariance, given the KL term (the paper's "
        "k: 2e-3 for 7B models, 2e-4 for 32B).",
    )
    kl_cov_coef: float = Field(
        1.0, ge=0, le=100, description="kl_cov: coefficient of |log pi - log pi_old| on the selected tokens (beta)."
    )
    guidance_coef: float = Field(
        0.0,
        ge=0,
        le=100,
        description="Off-policy guidance (LUFFY / ReLIFT style): add this times an SFT loss on the reference "
        "solution of every prompt of the step whose samples all failed (token mean over those solutions' tokens, "
        "over every process); its share of the loss is plotted (guidance/loss_share). 0 is off.",
    )
    guidance_field: str = Field(
        "answer",
        min_length=1,
        description="Guidance: the row field holding the reference solution ('answer', or one of data.extra_fields); "
        "it is trained on as the assistant's answer, followed by the end-of-sequence token.",
    )
    guidance_shaping: float | None = Field(
        None,
        gt=0,
        le=10,
        description="Guidance: LUFFY's policy shaping gamma: each reference token's loss is -p / (p + gamma) instead "
        "of -log p, which weighs the tokens the policy finds unlikely up (LUFFY uses 0.1). Empty: -log p.",
    )

    # On-policy distillation (the run's teacher section; trainers.algorithms.distillation).
    distill_signal: str = Field(
        "reverse_kl", description="With a teacher: how the teacher's logprobs of the sampled tokens become a "
        "per-token term of the advantage."
    )
    distill_coef: float = Field(
        1.0, ge=0, le=100,
        description="With a teacher: each sampled token's advantage gains -distill_coef * (log pi_student - "
        "log pi_teacher) (Tinker's kl_penalty_coef).",
    )  # fmt: skip
    reward_advantage_weight: float = Field(
        1.0, ge=0, le=100,
        description="The rubric's advantage is multiplied by this before the teacher's term is added; 0 is pure "
        "on-policy distillation (the rubric's reward is reported, not trained on), which needs a teacher.",
    )  # fmt: skip

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str | None) -> str | None:
        return choice(PRESETS, v, "preset") if v else None

    @field_validator("advantage_estimator")
    @classmethod
    def _adv(cls, v: str) -> str:
        return choice(ADVANTAGE_ESTIMATORS, v, "advantage estimator")

    @field_validator("policy_loss")
    @classmethod
    def _loss(cls, v: str) -> str:
        return choice(POLICY_LOSSES, v, "policy loss")

    @field_validator("loss_agg_mode")
    @classmethod
    def _agg(cls, v: str) -> str:
        return choice(LOSS_AGG_MODES, v, "loss aggregation mode")

    @field_validator("kl_estimator")
    @classmethod
    def _kl(cls, v: str) -> str:
        return choice(KL_ESTIMATORS, v, "KL estimator")

    @field_validator("distill_signal")
    @classmethod
    def _distill(cls, v: str) -> str:
        return choice(DISTILL_SIGNALS, v, "distillation signal")

    @field_validator("correction")
    @classmethod
    def _correction(cls, v: str | None) -> str | None:
        return choice(OFF_POLICY_CORRECTIONS, v, "off-policy correction") if v else None

    @model_validator(mode="after")
    def _one_correction(self) -> AlgorithmSpec:
        if self.tis_cap is not None and self.correction is not None:
            raise field_error(self, "tis_cap", "set tis_cap or a correction, not both (correction 'tis' is tis_cap)")
        return self

    @model_validator(mode="after")
    def _objective_bounds(self) -> AlgorithmSpec:
        if self.positive_advantage_weight == 0 and self.negative_advantage_weight == 0:
            raise field_error(
                self, "positive_advantage_weight", "positive and negative advantage weights cannot both be 0"
            )
        if self.clip_cov_lb >= self.clip_cov_ub:
            raise field_error(self, "clip_cov_lb", "clip_cov_lb must be below clip_cov_ub")
        return self

    @property
    def selects_tokens(self) -> bool:
        """Whether the loss needs a selection over the whole step's tokens (forking tokens, Clip-Cov, KL-Cov)."""
        return self.entropy_top_ratio is not None or self.policy_loss in ("clip_cov", "kl_cov")

    @property
    def off_policy(self) -> OffPolicyCorrection | None:
        """The correction in force: `correction` with its band, or tis_cap's token-level TIS; None: none."""
        if self.correction is not None:
            return OffPolicyCorrection(self.correction, self.correction_low, self.correction_high)
        if self.tis_cap is not None:
            return OffPolicyCorrection("tis", self.correction_low, self.tis_cap)
        return None
