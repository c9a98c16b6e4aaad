"""regex: 1 when the completion matches a pattern (searched anywhere, or the whole completion)."""

from __future__ import annotations

import re

from trainers.report import CriterionScore
from trainers.rewards.catalog import RegexParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, quoted
from trainers.rewards.sample import Sample


@CRITERIA.register("regex")
class Regex(Criterion):
    params_model = RegexParams
    params: RegexParams

    def __init__(self, params: RegexParams) -> None:
        super().__init__(params)
        flags = (re.MULTILINE if params.multiline else 0) | (re.DOTALL if params.dotall else 0)
        self.pattern = re.compile(params.pattern, flags)  # compiled once per rubric, not per sample

    def score_one(self, sample: Sample) -> CriterionScore:
        p = self.params
        match = (
            self.pattern.search(sample.completion) if p.mode == "search" else self.pattern.fullmatch(sample.completion)
        )
        what = "matches" if p.mode == "search" else "fully matches"
        if match:
            verdict = f"{what} {quoted(p.pattern)} at {quoted(match.group(0))}"
        else:
            verdict = f"no {'match' if p.mode == 'search' else 'full match'} for {quoted(p.pattern)}"
        hit = match is not None
        score = float(hit != p.invert)
        return CriterionScore(score, verdict + (" (inverted)" if p.invert else ""))
