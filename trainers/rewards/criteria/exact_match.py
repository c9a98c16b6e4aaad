"""exact_match: the completion (or the answer extracted from it) equals the reference, after normalisation."""

from __future__ import annotations

import re
import string

from trainers.report import CriterionScore
from trainers.rewards.catalog import ExactMatchParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, quoted, reference
from trainers.rewards.extract import NotFound, extract_answer
from trainers.rewards.sample import Sample

_PUNCTUATION = str.maketrans("", "", string.punctuation)


@CRITERIA.register("exact_match")
class ExactMatch(Criterion):
    params_model = ExactMatchParams
    params: ExactMatchParams

    def normalise(self, text: str) -> str:
        p = self.params
        if p.strip_punctuation:
            text = text.translate(_PUNCTUATION)
        if p.strip_whitespace:
            text = re.sub(r"\s+", " ", text).strip()
        if not p.case_sensitive:
            text = text.casefold()
        return text

    def score_one(self, sample: Sample) -> CriterionScore:
        p = self.params
        expected = reference(sample, p.reference_field)
        # A list reference means "any of these answers is right".
        accepted = [str(e) for e in expected] if isinstance(expected, list) else [str(expected)]
        try:
            got = extract_answer(sample.completion, p.extract, marker=p.marker, pattern=p.pattern)
        except NotFound as exc:
            return CriterionScore(0.0, f"{exc}; expected {quoted(accepted[0])}")
        normalised = self.normalise(got)
        if any(normalised == self.normalise(a) for a in accepted):
            return CriterionScore(1.0, f"matched {quoted(got)}")
        return CriterionScore(0.0, f"expected {quoted(accepted[0])}, got {quoted(got)}")
