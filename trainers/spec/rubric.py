"""The reward: a rubric of weighted criteria combined by a formula, and what happens when scoring fails."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from trainers.rewards.catalog import params_model
from trainers.rewards.formula import validate_formula
from trainers.spec.base import Section, field_error, located


class CriterionSpec(Section):
    name: str = Field(..., description="Short identifier; used in metric keys (reward/<name>/mean) and formulas.")
    kind: str = Field(..., description="Criterion kind; see trainers.rewards.catalog.CRITERION_KINDS.")
    weight: float = Field(1.0, ge=-100, le=100, description="Weight in the weighted sum.")
    params: dict[str, Any] = Field(default_factory=dict, description="Kind-specific parameters.")

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", v):
            raise ValueError("must be an identifier (letters, digits, _; not starting with a digit)")
        return v

    @model_validator(mode="after")
    def _params_match_kind(self) -> CriterionSpec:
        model = params_model(self.kind)
        try:
            self.__dict__["params"] = model.model_validate(self.params).model_dump()
        except ValidationError as exc:  # located under params.<name>, so forms show it beside that parameter
            raise located(exc, "params") from None
        return self

    def params_section(self) -> BaseModel:
        """The params as the kind's model (trainers.access finds the paths and endpoints they name)."""
        return params_model(self.kind).model_validate(self.params)


class RubricSpec(Section):
    """The reward: weighted criteria, combined by a weighted sum or a formula."""

    criteria: list[CriterionSpec] = Field(..., description="Ordered weighted criteria.")
    combine: Literal["weighted_sum", "formula"] = Field(
        "weighted_sum", description="How criterion scores become one reward."
    )
    formula: str | None = Field(
        None,
        description="Expression over criterion names with + - * / min max abs clip, e.g. 'correct * min(format, 1)'.",
    )
    pass_threshold: float | None = Field(None, description="A completion 'passes' at reward >= this (for pass@k).")

    def warnings(self) -> dict[str, str]:
        """{"criteria.<i>.params.<name>": why} for valid settings worth a second look (a regex pattern
        with nested quantifiers): shown when the rubric is saved, never a refusal."""
        out = {}
        for i, c in enumerate(self.criteria):
            params = params_model(c.kind).model_validate(c.params)
            out.update({f"criteria.{i}.params.{name}": text for name, text in params.warnings().items()})
        return out

    @field_validator("criteria")
    @classmethod
    def _some_criterion(cls, v: list[CriterionSpec]) -> list[CriterionSpec]:
        if not v:
            raise ValueError("add at least one criterion: with none, the reward would be 0 for every rollout")
        return v

    @model_validator(mode="after")
    def _some_weight(self) -> RubricSpec:
        # A formula names the criteria it uses, so weights only matter to the weighted sum.
        if self.combine == "weighted_sum" and all(c.weight == 0 for c in self.criteria):
            raise field_error(
                self, "criteria", "every criterion's weight is 0: the reward would be 0 for every rollout"
            )
        return self

    @model_validator(mode="after")
    def _check(self) -> RubricSpec:
        names = [c.name for c in self.criteria]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"criterion names must be unique; repeated: {', '.join(dupes)}")
        if self.combine == "formula" and not self.formula:
            raise ValueError("combine='formula' needs a formula")
        if self.combine == "formula":
            validate_formula(self.formula or "", names)  # unknown names, disallowed syntax: refused on save
        return self


class RewardSpec(Section):
    """Watching the reward while a run trains: when criteria that fail on many rollouts warn, or stop it."""

    failure_warn_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Warn when a criterion fails (raises, times out) on more than this share of a step's rollouts: "
        "a failed criterion scores 0, so the run would otherwise look like it learns nothing.",
    )
    stop_after_failing_steps: int = Field(
        0, ge=0, description="End the run failed after this many steps in a row above that share; 0 never stops."
    )
