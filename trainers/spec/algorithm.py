"""The GRPO family's knobs: group size, advantage estimator, policy loss, clipping, KL and filters."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from trainers.algorithms.catalog import (
    ADVANTAGE_ESTIMATORS,
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
    adv_eps: float = Field(1e-6, gt=0, description="Added to the std in normalisation.")
    gamma: float = Field(1.0, ge=0, le=1, description="Discount for token-level returns (REINFORCE++).")
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
        description="IGPO: add to each turn's reward this times the gain in the policy's log-probability of the "
        "reference answer over the turn (one extra forward pass per turn); 0 is off.",
    )
    info_gain_answer_field: str = Field(
        "answer", min_length=1, description="IGPO: the dataset field holding each row's reference answer."
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

    @field_validator("correction")
    @classmethod
    def _correction(cls, v: str | None) -> str | None:
        return choice(OFF_POLICY_CORRECTIONS, v, "off-policy correction") if v else None

    @model_validator(mode="after")
    def _one_correction(self) -> AlgorithmSpec:
        if self.tis_cap is not None and self.correction is not None:
            raise field_error(self, "tis_cap", "set tis_cap or a correction, not both (correction 'tis' is tis_cap)")
        return self

    @property
    def off_policy(self) -> OffPolicyCorrection | None:
        """The correction in force: `correction` with its band, or tis_cap's token-level TIS; None: none."""
        if self.correction is not None:
            return OffPolicyCorrection(self.correction, self.correction_low, self.correction_high)
        if self.tis_cap is not None:
            return OffPolicyCorrection("tis", self.correction_low, self.tis_cap)
        return None
