"""contains: keywords found in the completion, scored all / any / fraction (or the reverse when forbidden)."""

from __future__ import annotations

from trainers.report import CriterionScore
from trainers.rewards.catalog import ContainsParams
from trainers.rewards.criteria.base import CRITERIA, Criterion
from trainers.rewards.sample import Sample


@CRITERIA.register("contains")
class Contains(Criterion):
    """Score from the keywords found: all -> 1 if every one, any -> 1 if at least one,
    fraction -> found / total. `forbidden` scores 1 minus that, so a completion with
    none of the keywords gets 1."""

    params_model = ContainsParams
    params: ContainsParams

    def score_one(self, sample: Sample) -> CriterionScore:
        p = self.params
        text = sample.completion if p.case_sensitive else sample.completion.casefold()
        found = [k for k in p.keywords if (k if p.case_sensitive else k.casefold()) in text]
        if p.mode == "all":
            hits = float(len(found) == len(p.keywords))
        elif p.mode == "any":
            hits = float(bool(found))
        else:
            hits = len(found) / len(p.keywords)
        missing = [k for k in p.keywords if k not in found]
        explanation = f"found {len(found)}/{len(p.keywords)}"
        if found:
            explanation += f": {', '.join(map(repr, found[:5]))}"
        if missing and not p.forbidden:
            explanation += f"; missing {', '.join(map(repr, missing[:5]))}"
        if p.forbidden:
            return CriterionScore(1.0 - hits, explanation + " (forbidden)")
        return CriterionScore(hits, explanation)
