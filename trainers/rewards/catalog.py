"""Criterion kinds and their parameters: the schema the studio renders and validates.

Imports without torch. The scoring code for each kind lives in `trainers/rewards/criteria/`;
`tests/trainers/rewards/test_catalog.py` checks that every kind here has an implementation.
"""

from __future__ import annotations

import ast
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trainers.access import ENDPOINT, MODEL, marks
from trainers.registry import Registry
from trainers.rewards.patterns import DEFAULT_TIMEOUT_S, compile_pattern, warnings_for


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def warnings(self) -> dict[str, str]:
        """{parameter: what may go wrong} for valid values worth a second look when the rubric is saved."""
        return {}


def _compiles(pattern: str) -> str:
    """Refuse a bad regular expression when the rubric is saved, not when the first sample is scored.
    Compiled by `regex`, the engine that runs it (under a time limit)."""
    compile_pattern(pattern)
    return pattern


class ExactMatchParams(Params):
    """Completion (or its extracted answer) equals the reference field."""

    reference_field: str = Field("answer", description="Row field holding the expected answer.")
    extract: Literal["full", "last_line", "boxed", "after_marker", "regex"] = Field(
        "full", description="Which part of the completion is compared."
    )
    marker: str = Field("Answer:", description="Text after which the answer starts (extract=after_marker).")
    pattern: str = Field("", description="Regex whose first group is the answer (extract=regex).")
    case_sensitive: bool = Field(False, description="Compare case-sensitively.")
    strip_whitespace: bool = Field(True, description="Collapse and strip whitespace before comparing.")
    strip_punctuation: bool = Field(False, description="Drop punctuation before comparing.")

    _pattern_compiles = field_validator("pattern")(_compiles)

    def warnings(self) -> dict[str, str]:
        found = warnings_for(self.pattern) if self.extract == "regex" else []
        return {"pattern": found[0]} if found else {}

    @model_validator(mode="after")
    def _extract_needs_its_option(self) -> ExactMatchParams:
        if self.extract == "regex" and not self.pattern:
            raise ValueError("extract='regex' needs a pattern")
        if self.extract == "after_marker" and not self.marker:
            raise ValueError("extract='after_marker' needs a marker")
        return self


class RegexParams(Params):
    """Score 1 when the completion matches (or fully matches) a pattern."""

    pattern: str = Field(..., description="Python regular expression.")
    mode: Literal["search", "fullmatch"] = Field("search", description="search anywhere, or the whole completion.")
    multiline: bool = Field(False, description="re.MULTILINE")
    dotall: bool = Field(True, description="re.DOTALL")
    invert: bool = Field(False, description="Score 1 when it does NOT match.")
    timeout_s: float = Field(
        DEFAULT_TIMEOUT_S,
        gt=0,
        le=10,
        description="Time limit per completion: a pattern that backtracks without end scores 0 with an error.",
    )

    _pattern_compiles = field_validator("pattern")(_compiles)

    def warnings(self) -> dict[str, str]:
        found = warnings_for(self.pattern)
        return {"pattern": found[0]} if found else {}


class ContainsParams(Params):
    """Fraction (or all/any) of keywords found in the completion."""

    keywords: list[str] = Field(..., min_length=1, description="Keywords to look for.")
    mode: Literal["all", "any", "fraction"] = Field("fraction", description="How hits become a score.")
    case_sensitive: bool = Field(False, description="Match case-sensitively.")
    forbidden: bool = Field(False, description="Penalise instead: score 1 when none appear.")


class MathEquivParams(Params):
    """Numeric / LaTeX answer equivalence with math-verify."""

    reference_field: str = Field("answer", description="Row field holding the gold answer.")
    extract: Literal["auto", "boxed", "last_number"] = Field(
        "auto", description="auto lets math-verify find LaTeX or plain expressions."
    )
    timeout_s: float = Field(5.0, gt=0, le=60, description="Per-comparison time limit.")


class LengthParams(Params):
    """Length shaping: 1 inside [min, max] tokens-ish (characters or words), decaying outside."""

    unit: Literal["chars", "words"] = Field("words", description="How length is measured.")
    target_min: int = Field(0, ge=0, description="Shortest length that scores 1.")
    target_max: int = Field(200, ge=1, description="Longest length that scores 1.")
    slope: float = Field(0.01, ge=0, description="Score lost per unit outside the target range (floored at 0).")

    @model_validator(mode="after")
    def _range_in_order(self) -> LengthParams:
        if self.target_min > self.target_max:
            raise ValueError(f"target_min ({self.target_min}) is above target_max ({self.target_max})")
        return self


class PythonParams(Params):
    """User function `score(prompt, completion, **fields) -> float | (float, str)` run in a sandbox."""

    code: str = Field(..., description="Python source defining score(prompt, completion, **fields).")
    timeout_s: float = Field(5.0, gt=0, le=120, description="Wall-clock limit per call.")
    memory_mb: int = Field(512, ge=32, le=16384, description="Address-space limit of the sandbox process.")

    @field_validator("code")
    @classmethod
    def _defines_score(cls, code: str) -> str:
        """Parse (never run) the code so a syntax error is reported, with its line, when the rubric is saved."""
        try:
            tree = ast.parse(code)
        except SyntaxError as exc:
            raise ValueError(f"syntax error at line {exc.lineno}: {exc.msg}") from None
        except ValueError as exc:  # e.g. null bytes
            raise ValueError(f"cannot parse the code: {exc}") from None
        if not any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "score" for n in tree.body):
            raise ValueError("the code must define a top-level function score(prompt, completion, **fields)")
        return code


class CodeExecParams(Params):
    """Extract code from the completion and run it against test cases in a sandbox."""

    language: Literal["python"] = Field("python", description="Language of the program.")
    tests_field: str = Field(
        "tests", description="Row field with tests: a list of {input, output} or Python assert lines."
    )
    extract: Literal["fenced", "full"] = Field("fenced", description="Take the last ```block```, or everything.")
    timeout_s: float = Field(5.0, gt=0, le=120, description="Wall-clock limit for all tests of one completion.")
    memory_mb: int = Field(512, ge=32, le=16384, description="Address-space limit of the sandbox process.")
    partial_credit: bool = Field(True, description="Score = fraction of passing tests (else all-or-nothing).")


class LLMJudgeParams(Params):
    """A judge model grades the completion against a written rubric; a score is parsed from its reply."""

    backend: Literal["openai", "local"] = Field("openai", description="OpenAI-compatible HTTP endpoint or local model.")
    base_url: str = Field(
        "http://localhost:8000/v1",
        description="Endpoint (backend=openai); its host must be on the operator's list (the completions are sent there).",
        json_schema_extra=marks(ENDPOINT, when={"backend": "openai"}),
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        pattern=r"^[A-Z][A-Z0-9_]*API_KEY$",
        description="Environment variable holding the API key; its name must end in API_KEY, so a "
        "rubric cannot send the worker's other variables (database URL, secret key) to an endpoint.",
    )
    model: str = Field(
        ...,
        description="Model name (openai) or local path (local).",
        json_schema_extra=marks(MODEL, when={"backend": "local"}),
    )
    rubric: str = Field(..., min_length=1, description="What the judge is told to look for.")
    score_min: float = Field(0.0, description="Lowest score the judge may give.")
    score_max: float = Field(10.0, description="Highest score the judge may give; normalised to [0, 1].")
    timeout_s: float = Field(60.0, gt=0, le=600, description="Per-request time limit.")
    max_tokens: int = Field(256, ge=1, le=8192, description="Judge reply length.")

    @model_validator(mode="after")
    def _score_range(self) -> LLMJudgeParams:
        if self.score_max <= self.score_min:
            raise ValueError(f"score_max ({self.score_max:g}) must be above score_min ({self.score_min:g})")
        return self


# Criterion kind -> its parameters model (torch-free: the studio renders forms from these).
CRITERION_KINDS: Registry[type[Params]] = Registry("criterion kind")
for _kind, _model in (
    ("exact_match", ExactMatchParams),
    ("regex", RegexParams),
    ("contains", ContainsParams),
    ("math_equiv", MathEquivParams),
    ("length", LengthParams),
    ("python", PythonParams),
    ("code_exec", CodeExecParams),
    ("llm_judge", LLMJudgeParams),
):
    CRITERION_KINDS.register(_kind)(_model)


def params_model(kind: str) -> type[Params]:
    """The parameters model of a criterion kind; `UnknownNameError` (a ValueError) listing the kinds."""
    return CRITERION_KINDS.get(kind)
