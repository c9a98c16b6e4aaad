"""Criterion kinds, one module each, registered in `CRITERIA` by kind name.

Importing this package registers every kind; none of them imports torch at module level
(local judges and the reward model import transformers only when they first score).
"""

from __future__ import annotations

from typing import Any

from trainers.rewards.criteria import (  # noqa: F401  (importing registers them)
    calibration,
    checklist,
    code_exec,
    contains,
    exact_match,
    flawed_positive,
    group_judge,
    length,
    llm_judge,
    majority_vote,
    math_equiv,
    pairwise_judge,
    python,
    regex,
    reward_model,
    text_similarity,
    verifiers_reward,
)
from trainers.rewards.criteria.base import CRITERIA, Criterion


def build_criterion(kind: str, params: dict[str, Any]) -> Criterion:
    """A ready criterion of `kind`; unknown kinds raise an error listing the valid ones."""
    return CRITERIA.get(kind).from_params(params)


__all__ = ["CRITERIA", "Criterion", "build_criterion"]
