"""python: a user-written `score(prompt, completion, **fields)` run in a sandbox worker. A
`transcript` parameter, when the function names one, receives a multi-turn episode's conversation.

One worker process per batch loads the code once and scores every sample, each call with
its own time limit. A call that raises scores 0 with the error; a call that hangs or kills
the process (os._exit, segfault, memory) scores 0 with the reason, and a fresh worker
takes the remaining samples. Code that cannot load (syntax error, failing import) gives
every sample of the batch that error.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from trainers.report import CriterionScore
from trainers.rewards.catalog import PythonParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, clip_text, failure
from trainers.rewards.sample import Sample
from trainers.sandbox.process import Limits, SandboxError, WorkerPool


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


def call_kwargs(sample: Sample, *, with_transcript: bool = False) -> dict[str, Any]:
    fields = {k: v for k, v in sample.fields.items() if k not in ("prompt", "completion", "transcript")}
    extra = {"transcript": sample.transcript} if with_transcript and sample.transcript is not None else {}
    return {"prompt": sample.prompt, "completion": sample.completion, **fields, **extra}


def names_parameter(source: str, function: str, parameter: str) -> bool:
    """Whether the module-level `def function(...)` in `source` has a parameter called `parameter`.
    Read from the syntax tree, without running the code (user code runs only in the sandbox): a
    function written before transcripts existed is called exactly as before."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            args = node.args
            return parameter in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    return False


@CRITERIA.register("python")
class Python(Criterion):
    params_model = PythonParams
    params: PythonParams
    runs_elsewhere = True

    @property
    def wants_transcript(self) -> bool:
        """A multi-turn episode's transcript goes to `score` only when it names a `transcript` parameter."""
        return names_parameter(self.params.code, "score", "transcript")

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
                    outcome = pool.call(**call_kwargs(sample, with_transcript=self.wants_transcript))
                except SandboxError as exc:  # the code does not load: every sample gets why
                    results.append(failure(str(exc)))
                    continue
                results.append(to_score(outcome.value) if outcome.ok else failure(outcome.error))
        return results
