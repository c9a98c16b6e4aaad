"""Which prompts a step draws and how many rollouts each gets (samplers, budgets, hints)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from trainers.curriculum.catalog import BUDGETS, SAMPLERS
from trainers.spec.base import Section, choice, field_error


class CurriculumSpec(Section):
    """Which prompts each step draws and how many rollouts each gets: samplers, budgets, per-prompt statistics."""

    sampler: str = Field("uniform", description="How each step's prompts are chosen (uniform keeps the data order).")
    budget: str = Field("fixed", description="How many rollouts each chosen prompt gets (fixed: group_size each).")
    pass_reward: float = Field(
        1.0,
        ge=-1e6,
        le=1e6,
        description="A rollout passes when its reward is at least this; rubric.pass_threshold, when set, decides "
        "instead. Passes feed each prompt's pass-rate estimate.",
    )
    prior_alpha: float = Field(
        1.0, gt=0, le=1000, description="Beta prior of an unseen prompt's pass rate: pseudo-passes (1 and 1: uniform)."
    )
    prior_beta: float = Field(
        1.0, gt=0, le=1000, description="Beta prior of an unseen prompt's pass rate: pseudo-fails."
    )
    decay: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Forgetting: before each update a prompt's posterior moves this far from the prior back to it "
        "(alpha = decay * alpha + (1 - decay) * prior_alpha + passes); 1 keeps every past rollout, lower follows a "
        "model that changes.",
    )
    target_pass_rate: float = Field(
        0.5, gt=0, lt=1, description="online_difficulty: the pass rate it steers toward (0.5 gives the most signal)."
    )
    exploration_floor: float = Field(
        0.25,
        ge=0,
        le=1,
        description="online_difficulty: each prompt slot is drawn in data order with this probability, so no "
        "prompt starves.",
    )
    skip_after: int = Field(
        3,
        ge=1,
        le=1000,
        description="skip_solved: skip a prompt after this many all-pass (or all-fail) groups in a row.",
    )
    skip_failed: bool = Field(True, description="skip_solved: also skip prompts failed skip_after times in a row.")
    recheck_rate: float = Field(
        0.1, ge=0, le=1, description="skip_solved: probability that a skipped prompt is drawn anyway, to re-check it."
    )
    rollouts_per_step: int | None = Field(
        None,
        ge=2,
        le=1_000_000,
        description="knapsack: rollouts per step shared among the step's prompts; empty: prompts_per_step x "
        "group_size (the same cost as fixed).",
    )
    min_group_size: int = Field(2, ge=2, le=4096, description="knapsack: fewest rollouts a chosen prompt gets.")
    max_group_size: int = Field(
        32, ge=2, le=4096, description="knapsack: most rollouts one prompt gets; brorl: every prompt's group size."
    )
    generation_chunk: int = Field(
        64, ge=1, le=65536, description="brorl: sequences generated per engine call, so large groups fit in memory."
    )
    # Hints (trainers.curriculum.hints; GHPO, arXiv:2507.10628).
    hints: bool = Field(
        False,
        description="Retry a prompt whose whole group failed with the start of its reference solution opening the "
        "answer; the hinted group trains in its place, and the hint's tokens are never trained on.",
    )
    hint_field: str = Field(
        "answer",
        min_length=1,
        description="Row field holding the reference solution the hint is cut from: 'answer' (the data's answer "
        "field) or one of data.extra_fields.",
    )
    hint_start_fraction: float = Field(
        0.5, gt=0, lt=1, description="Share of the solution's tokens given the first time a prompt is hinted."
    )
    hint_min_fraction: float = Field(
        0.1, gt=0, lt=1, description="Shortest hint, as a share of the solution: shrinking stops here."
    )
    hint_max_fraction: float = Field(
        0.9, gt=0, lt=1, description="Longest hint, as a share of the solution: growing stops here."
    )
    hint_shrink: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="A prompt's hint is multiplied by this each time its hinted group passes, and divided by it "
        "when the hinted group fails too; the prompt passing without a hint drops its hint.",
    )
    hint_max_retries: int = Field(
        1, ge=1, le=8, description="Hinted retries of a failed group per step, each longer than the last."
    )

    @field_validator("sampler")
    @classmethod
    def _sampler(cls, v: str) -> str:
        return choice(SAMPLERS, v, "prompt sampler")

    @field_validator("budget")
    @classmethod
    def _budget(cls, v: str) -> str:
        return choice(BUDGETS, v, "rollout budget")

    @model_validator(mode="after")
    def _group_bounds(self) -> CurriculumSpec:
        if self.min_group_size > self.max_group_size:
            raise field_error(self, "min_group_size", "min_group_size must not exceed max_group_size")
        return self

    @model_validator(mode="after")
    def _hint_bounds(self) -> CurriculumSpec:
        if not self.hint_min_fraction <= self.hint_start_fraction <= self.hint_max_fraction:
            raise field_error(
                self,
                "hint_start_fraction",
                "hint_start_fraction must lie between hint_min_fraction and hint_max_fraction",
            )
        return self


def step_rollouts(budget: str, prompts: int, group_size: int, *, rollouts_per_step: int | None = None,
                  max_group_size: int = 32) -> int:  # fmt: skip
    """Rollouts one generation round of a step samples for `prompts` prompts under the rollout budget
    `budget` (trainers.curriculum.budgets): fixed gives each prompt group_size; knapsack shares
    rollouts_per_step among them (empty: what fixed costs; the spec keeps it within min..max_group_size
    per prompt); brorl gives each max_group_size. The studio's step cost (and its JavaScript twin,
    experiment_form.js stepCost) count with this."""
    if budget == "fixed":
        return prompts * group_size
    if budget == "knapsack":
        return rollouts_per_step or prompts * group_size
    if budget == "brorl":
        return prompts * max_group_size
    raise ValueError(f"unknown rollout budget {budget!r}; known: {', '.join(BUDGETS)}")
