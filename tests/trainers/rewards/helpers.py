"""Small builders shared by the reward tests."""

from __future__ import annotations

from typing import Any

from trainers.report import CriterionScore
from trainers.rewards.criteria import build_criterion
from trainers.rewards.sample import Sample


def sample(completion: str, prompt: str = "What is 6 * 7?", **fields: Any) -> Sample:
    return Sample(prompt=prompt, completion=completion, fields=fields)


def score_one(kind: str, params: dict[str, Any], completion: str, **fields: Any) -> CriterionScore:
    """One sample through one freshly built criterion."""
    criterion = build_criterion(kind, params)
    try:
        [result] = criterion.score_batch([sample(completion, **fields)])
    finally:
        criterion.close()
    return result
