"""regex: 1 when the completion matches a pattern (searched anywhere, or the whole completion).

The pattern runs under `timeout_s` per completion (the `regex` engine stops it): a pattern that
backtracks catastrophically on a long completion scores 0 with an error instead of holding the
scoring worker."""

from __future__ import annotations

import regex

from trainers.report import CriterionScore
from trainers.rewards.catalog import RegexParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, failure, quoted
from trainers.rewards.patterns import PatternTimeout, compile_pattern, search
from trainers.rewards.sample import Sample


@CRITERIA.register("regex")
class Regex(Criterion):
    params_model = RegexParams
    params: RegexParams

    def __init__(self, params: RegexParams) -> None:
        super().__init__(params)
        flags = (regex.MULTILINE if params.multiline else 0) | (regex.DOTALL if params.dotall else 0)
        self.pattern = compile_pattern(params.pattern, flags)  # compiled once per rubric, not per sample

    def score_one(self, sample: Sample) -> CriterionScore:
        p = self.params
        try:
            match = search(self.pattern, sample.completion, p.timeout_s, whole=p.mode == "fullmatch")
        except PatternTimeout as exc:
            return failure(str(exc))
        what = "matches" if p.mode == "search" else "fully matches"
        if match:
            verdict = f"{what} {quoted(p.pattern)} at {quoted(match.group(0))}"
        else:
            verdict = f"no {'match' if p.mode == 'search' else 'full match'} for {quoted(p.pattern)}"
        hit = match is not None
        score = float(hit != p.invert)
        return CriterionScore(score, verdict + (" (inverted)" if p.invert else ""))
