"""python: a user-written `score(prompt, completion, **fields)` run in a sandbox worker.

One worker process per batch loads the code once and scores every sample, each call with
its own time limit. A call that raises scores 0 with the error; a call that hangs or kills
the process (os._exit, segfault, memory) scores 0 with the reason, and a fresh worker
takes the remaining samples. Code that cannot load (syntax error, failing import) gives
every sample of the batch that error.
"""

from __future__ import annotations

import math
from typing import Any

from trainers.report import CriterionScore
from trainers.rewards.catalog import PythonParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, clip_text, failure
from trainers.rewards.sample import Sample
from trainers.rewards.sandbox import Limits, SandboxError, WorkerPool


def to_score(value: Any) -> CriterionScore:
    """Turn what score() returned (float, bool, or (float, str)) into a score; anything else is an error."""
    explanation = ""
    if isinstance(value, list | tuple) and len(value) == 2:  # a tuple arrives from the sandbox as a list
        value, explanation = value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return failure(f"score() returned {clip_text(repr(value), 80)}; expected a number or (number, explanation)")
    if not math.isfinite(value):
        return failure(f"score() returned {value}")
    return CriterionScore(float(value), clip_text(str(explanation)) if explanation else f"score() returned {value:g}")


def call_kwargs(sample: Sample) -> dict[str, Any]:
    fields = {k: v for k, v in sample.fields.items() if k not in ("prompt", "completion")}
    return {"prompt": sample.prompt, "completion": sample.completion, **fields}


@CRITERIA.register("python")
class Python(Criterion):
    params_model = PythonParams
    params: PythonParams
    runs_elsewhere = True

    @property
    def limits(self) -> Limits:
        return Limits(timeout_s=self.params.timeout_s, memory_mb=self.params.memory_mb)

    def score_batch(self, samples: list[Sample]) -> list[CriterionScore]:
        results: list[CriterionScore] = []
        # Code that hangs on sample after sample is given up on for the rest of the batch: a
        # step must not wait batch size x timeout_s on one broken criterion.
        with WorkerPool(self.limits, len(samples), give_up_after_timeouts=3, source=self.params.code) as pool:
            for sample in samples:
                try:
                    outcome = pool.call(**call_kwargs(sample))
                except SandboxError as exc:  # the code does not load: every sample gets why
                    results.append(failure(str(exc)))
                    continue
                results.append(to_score(outcome.value) if outcome.ok else failure(outcome.error))
        return results
