"""Criterion kinds, one module each, registered in `CRITERIA` by kind name.

Importing this package registers every kind; none of them imports torch at module level
(the local LLM judge imports transformers only when it first scores).
"""

from __future__ import annotations

from typing import Any

from trainers.rewards.criteria import (  # noqa: F401  (importing registers them)
    code_exec,
    contains,
    exact_match,
    length,
    llm_judge,
    math_equiv,
    python,
    regex,
)
from trainers.rewards.criteria.base import CRITERIA, Criterion


def build_criterion(kind: str, params: dict[str, Any]) -> Criterion:
    """A ready criterion of `kind`; unknown kinds raise an error listing the valid ones."""
    return CRITERIA.get(kind).from_params(params)


__all__ = ["CRITERIA", "Criterion", "build_criterion"]
