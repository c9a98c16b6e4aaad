"""math_equiv: the completion's final answer equals the reference mathematically (math-verify).

`\\frac{1}{2}`, `0.5` and `1/2` are the same answer; so are `\\boxed{2}` and `2`.

math-verify (sympy underneath) can spend unbounded time on adversarial input, so every
parse and comparison has a time limit:
- in the main thread (the training loop, the CLI) scoring runs in-process and math-verify's
  own SIGALRM-based limit interrupts it (whole seconds: `timeout_s` is rounded up);
- elsewhere (a worker thread, where signals cannot be used) the batch is scored by a sandbox
  worker process running `judge`, killed and replaced if one sample outlives its limit.
A timeout scores 0 with the error text; an answer that cannot be found or parsed scores 0 with
an explanation (the model's fault, not the criterion's).
"""

from __future__ import annotations

import math
import signal
import threading
from typing import Any

from trainers.report import CriterionScore
from trainers.rewards.catalog import MathEquivParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, failure, quoted, reference
from trainers.rewards.extract import NotFound, last_boxed, last_number
from trainers.rewards.sample import Sample
from trainers.sandbox.process import Limits, SandboxError, WorkerPool

# The fallback worker imports sympy, which needs more room than user reward functions.
WORKER_MEMORY_MB = 4096


def _parse(text: str, seconds: int) -> list[Any]:
    from math_verify import parse
    from math_verify.errors import TimeoutException

    try:
        return parse(text, parsing_timeout=seconds, raise_on_error=True)
    except TimeoutException:
        raise TimeoutError(f"math-verify took longer than {seconds} s to parse {quoted(text)}") from None
    except Exception:  # unparseable text is "no answer", not a failure of the criterion
        return []


def _shown(parsed: list[Any]) -> str:
    # math-verify returns [sympy value, matched text]; show the text (printing sympy values can hang).
    texts = [p for p in parsed if isinstance(p, str)]
    return texts[-1] if texts else "?"


def judge(gold: str, completion: str, extract: str, timeout_s: float) -> dict[str, Any]:
    """Compare one completion with the gold answer: {"equal": bool, "gold": str, "pred": str | None}.
    Importable by the sandbox worker; math_verify is imported here so importing this module stays cheap."""
    from math_verify import verify
    from math_verify.errors import TimeoutException

    seconds = max(1, math.ceil(timeout_s))
    gold_parsed = _parse(gold, seconds) or _parse(f"${gold}$", seconds)
    if not gold_parsed:
        raise ValueError(f"math-verify cannot parse the reference answer {quoted(gold)}")
    try:
        if extract == "boxed":
            text = f"${last_boxed(completion)}$"
        elif extract == "last_number":
            text = last_number(completion)
        else:
            text = completion
    except NotFound as exc:
        return {"equal": False, "gold": gold, "pred": None, "why": str(exc)}
    pred = _parse(text, seconds)
    if not pred:
        return {"equal": False, "gold": gold, "pred": None, "why": "no math answer found"}
    try:
        equal = verify(gold_parsed, pred, timeout_seconds=seconds, raise_on_error=True)
    except TimeoutException:
        raise TimeoutError(f"math-verify took longer than {seconds} s to compare the answers") from None
    except Exception:
        equal = False
    return {"equal": bool(equal), "gold": gold, "pred": _answer_as_written(completion, text, extract, pred)}


def _answer_as_written(completion: str, text: str, extract: str, pred: list[Any]) -> str:
    """The answer as the completion wrote it (math-verify's own text is normalised, e.g. 0.5 -> \\frac{1}{2})."""
    if extract != "auto":
        return text.strip("$")
    try:
        return last_boxed(completion)
    except NotFound:
        return _shown(pred)


def to_score(verdict: dict[str, Any]) -> CriterionScore:
    if verdict["pred"] is None:
        return CriterionScore(0.0, f"{verdict['why']}; expected {quoted(verdict['gold'])}")
    if verdict["equal"]:
        return CriterionScore(1.0, f"{quoted(verdict['pred'])} equals {quoted(verdict['gold'])}")
    return CriterionScore(0.0, f"expected {quoted(verdict['gold'])}, got {quoted(verdict['pred'])}")


def signals_usable() -> bool:
    return hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()


@CRITERIA.register("math_equiv")
class MathEquiv(Criterion):
    params_model = MathEquivParams
    params: MathEquivParams

    def score_batch(self, samples: list[Sample]) -> list[CriterionScore]:
        if signals_usable():
            return super().score_batch(samples)
        return self._score_in_worker(samples)

    def score_one(self, sample: Sample) -> CriterionScore:
        p = self.params
        return to_score(judge(str(reference(sample, p.reference_field)), sample.completion, p.extract, p.timeout_s))

    def _score_in_worker(self, samples: list[Sample]) -> list[CriterionScore]:
        p = self.params
        # A parse and a comparison each get timeout_s (rounded up), plus a second to answer.
        limits = Limits(timeout_s=2 * math.ceil(p.timeout_s) + 1, memory_mb=WORKER_MEMORY_MB)
        results: list[CriterionScore] = []
        with WorkerPool(limits, len(samples), trusted_import=f"{__name__}:judge") as pool:
            for sample in samples:
                try:
                    gold = str(reference(sample, p.reference_field))
                except KeyError as exc:
                    results.append(failure(f"KeyError: {exc.args[0]}"))
                    continue
                try:
                    outcome = pool.call(gold, sample.completion, p.extract, p.timeout_s)
                except SandboxError as exc:
                    results.append(failure(f"math-verify worker failed to start: {exc}"))
                    continue
                results.append(to_score(outcome.value) if outcome.ok else failure(outcome.error))
        return results
