"""length: 1 inside [target_min, target_max] (characters or words), falling by `slope` per unit outside."""

from __future__ import annotations

from trainers.report import CriterionScore
from trainers.rewards.catalog import LengthParams
from trainers.rewards.criteria.base import CRITERIA, Criterion
from trainers.rewards.sample import Sample


@CRITERIA.register("length")
class Length(Criterion):
    params_model = LengthParams
    params: LengthParams

    def score_one(self, sample: Sample) -> CriterionScore:
        p = self.params
        n = len(sample.completion) if p.unit == "chars" else len(sample.completion.split())
        if n < p.target_min:
            distance = p.target_min - n
        elif n > p.target_max:
            distance = n - p.target_max
        else:
            return CriterionScore(1.0, f"{n} {p.unit}, within [{p.target_min}, {p.target_max}]")
        score = max(0.0, 1.0 - p.slope * distance)
        side = "short" if n < p.target_min else "long"
        return CriterionScore(score, f"{n} {p.unit}: {distance} too {side} for [{p.target_min}, {p.target_max}]")
