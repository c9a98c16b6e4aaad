"""code_exec: run the program in a completion against the row's test cases, in a sandbox.

Tests come from a row field, as a list of `{"input": ..., "output": ...}` pairs (stdin ->
expected stdout), a list of Python statements such as `assert add(2, 3) == 5`, an
APPS-style `{"inputs": [...], "outputs": [...]}`, or any of these as a JSON string.
One sandbox process per completion compiles the program once and forks per test;
completions run in parallel, one per CPU. A program that fails is a low score with the
reason in the explanation (the model's fault); only tests the rubric cannot read are errors.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trainers.report import CriterionScore
from trainers.rewards.catalog import CodeExecParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, clip_text, quoted, reference
from trainers.rewards.extract import NotFound, extract_code
from trainers.rewards.sample import Sample
from trainers.sandbox.process import Limits
from trainers.sandbox.programs import run_program_tests


def parse_tests(raw: Any, field_name: str) -> tuple[str, list[Any]]:
    """("stdio", [{input, output}, ...]) or ("asserts", ["assert ...", ...]) from a row field."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raw = [line for line in raw.splitlines() if line.strip()]
    if isinstance(raw, dict) and "inputs" in raw and "outputs" in raw:
        raw = [{"input": i, "output": o} for i, o in zip(raw["inputs"], raw["outputs"], strict=True)]
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"field {field_name!r} must be a non-empty list of tests")
    if all(isinstance(t, str) for t in raw):
        return "asserts", raw
    if all(isinstance(t, dict) and "input" in t and "output" in t for t in raw):
        return "stdio", [{"input": str(t["input"]), "output": str(t["output"])} for t in raw]
    raise ValueError(
        f"field {field_name!r}: every test must be an assert string or an object with 'input' and 'output'"
    )


def describe_failure(index: int, test: Any, result: dict[str, Any] | None) -> str:
    if result is None:
        return f"test {index + 1}: not run"
    label = f"test {index + 1}" + (f" ({clip_text(test, 50)})" if isinstance(test, str) else "")
    if "error" in result:
        return f"{label}: {clip_text(result['error'], 120)}"
    return f"{label}: expected {quoted(test['output'].strip())}, got {quoted(result.get('got', '').strip())}"


@CRITERIA.register("code_exec")
class CodeExec(Criterion):
    params_model = CodeExecParams
    params: CodeExecParams
    runs_elsewhere = True

    def score_batch(self, samples: list[Sample]) -> list[CriterionScore]:
        workers = max(1, min(len(samples), os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="code_exec") as pool:
            return list(pool.map(self._score_guarded, samples))

    def score_one(self, sample: Sample) -> CriterionScore:
        p = self.params
        style, tests = parse_tests(reference(sample, p.tests_field), p.tests_field)
        try:
            code = extract_code(sample.completion, p.extract)
        except NotFound as exc:
            return CriterionScore(0.0, str(exc))
        run = run_program_tests(code, tests, style, Limits(timeout_s=p.timeout_s, memory_mb=p.memory_mb))
        if run.fatal:
            return CriterionScore(0.0, clip_text(f"0/{len(tests)} tests ran: {run.fatal}"))
        passed = sum(1 for r in run.results.values() if r.get("passed"))
        score = passed / len(tests) if p.partial_credit else float(passed == len(tests))
        explanation = f"{passed}/{len(tests)} tests passed"
        if run.timed_out:
            explanation += f" (time limit of {p.timeout_s:g} s reached)"
        failed = [i for i in range(len(tests)) if not run.results.get(i, {}).get("passed")]
        if failed:
            explanation += "; " + describe_failure(failed[0], tests[failed[0]], run.results.get(failed[0]))
        return CriterionScore(score, clip_text(explanation))
