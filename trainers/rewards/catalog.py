"""Criterion kinds and their parameters: the schema the studio renders and validates.

Imports without torch. The scoring code for each kind lives in `trainers/rewards/criteria/`;
`tests/trainers/rewards/test_catalog.py` checks that every kind here has an implementation.
"""

from __future__ import annotations

import ast
from typing import Any, Literal

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


class JudgeBackendParams(Params):
    """Where a judge runs: an OpenAI-compatible endpoint or a local transformers model (shared by the judge kinds)."""

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
        "rubric cannot send the worker's other variables (database URL, secret key) to an endpoint. The key "
        "is sent only to the server in the matching *_BASE_URL variable (OPENAI_API_KEY: OpenAI's API "
        "without one), set beside it by the workers' operator.",
    )
    model: str = Field(
        ...,
        description="Model name (openai) or local path (local).",
        json_schema_extra=marks(MODEL, when={"backend": "local"}),
    )


def _timeout_field() -> Any:
    return Field(60.0, gt=0, le=600, description="Per-request time limit.")


def _max_tokens_field(default: int) -> Any:
    return Field(default, ge=1, le=8192, description="Judge reply length (tokens).")


def _score_range(params: Params) -> None:
    lo, hi = params.score_min, params.score_max  # type: ignore[attr-defined]
    if hi <= lo:
        raise ValueError(f"score_max ({hi:g}) must be above score_min ({lo:g})")


class LLMJudgeParams(JudgeBackendParams):
    """A judge model grades the completion against a written rubric; a score is parsed from its reply."""

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


# RULER's grading standards in our words (OpenPipe ART's default rubric says the same four things).
GROUP_RUBRIC = (
    "- A response that achieves the goal of the prompt must score clearly higher than one that does not.\n"
    "- Between two responses that both achieve it, the more direct and efficient one scores higher.\n"
    "- Small differences in quality get small differences in score; large ones, large differences.\n"
    "- Partial progress towards the goal may earn partial credit."
)


class GroupJudgeParams(JudgeBackendParams):
    """RULER-style relative scoring: one judge call sees every completion of a prompt (its group) side by
    side and answers JSON {"scores": [{"id": 1, "explanation": "...", "score": 0.8}, ...]}; each score is
    mapped from [score_min, score_max] to [0, 1]. A reply that is not that JSON scores the whole group 0
    with the reply as the error. Identical completions are shown once and share their score.
    Example: {"backend": "openai", "base_url": "http://localhost:8000/v1", "model": "Qwen/Qwen3-8B"}."""

    rubric: str = Field(GROUP_RUBRIC, min_length=1, description="Grading standards the judge applies to the group.")
    score_min: float = Field(0.0, description="Lowest score the judge may give.")
    score_max: float = Field(1.0, description="Highest score the judge may give; normalised to [0, 1].")
    show_reference: bool = Field(False, description="Show the judge the row's reference answer (RULER shows none).")
    reference_field: str = Field("answer", description="Row field with the reference answer (show_reference).")
    timeout_s: float = _timeout_field()
    max_tokens: int = _max_tokens_field(2048)

    @model_validator(mode="after")
    def _score_range(self) -> GroupJudgeParams:
        _score_range(self)
        return self


class PairwiseJudgeParams(JudgeBackendParams):
    """The judge compares two completions of the same prompt at a time and names the better one
    ("Winner: A", "Winner: B" or "Winner: tie"); a completion's score is its win rate (a win 1, a tie 0.5).
    compare=all_pairs: every pair of the group (n(n-1)/2 comparisons); anchor: each completion against the
    group's first one (which scores 0.5); reference: each against the row's reference answer. both_orders
    asks each comparison twice with the positions swapped and averages, so a judge that always prefers
    the first position gives a tie. A reply without a verdict scores the whole group 0 with the error.
    Example: {"model": "Qwen/Qwen3-8B", "compare": "all_pairs", "both_orders": true}."""

    rubric: str = Field(
        "Which response answers the prompt better: correct first, then complete, then clear and concise?",
        min_length=1,
        description="What makes one response better than another.",
    )
    compare: Literal["all_pairs", "anchor", "reference"] = Field(
        "all_pairs", description="Every pair of the group, each against the group's first completion, or each "
        "against the row's reference answer.",
    )  # fmt: skip
    reference_field: str = Field("answer", description="Row field with the reference answer (compare=reference).")
    both_orders: bool = Field(True, description="Ask each comparison in both orders (A/B and B/A) and average.")
    timeout_s: float = _timeout_field()
    max_tokens: int = _max_tokens_field(256)


class ChecklistItem(BaseModel):
    """One checklist item: what the response must do (or, for a pitfall, the mistake it must avoid)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., min_length=1, max_length=2000, description="The item, as the judge reads it.")
    weight: float = Field(1.0, gt=0, le=100, description="Its share of the reward.")
    kind: Literal["normal", "essential", "pitfall"] = Field(
        "normal",
        description="essential: RaR's most important items (with essential_gate, missing one scores 0); "
        "pitfall: the text names a mistake, which subtracts its weight when the response makes it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_shorthand(cls, value: object) -> object:
        """A bare string is a normal item of weight 1; RaR's {"description", "weight"} with a negative weight
        is a pitfall of that magnitude."""
        if isinstance(value, str):
            return {"text": value}
        if isinstance(value, dict) and "text" not in value:
            value = dict(value)
            for key in ("description", "criterion", "title"):
                if key in value:
                    value["text"] = value.pop(key)
                    break
            value.pop("title", None)
            category = value.pop("category", None)
            if "kind" not in value and isinstance(category, str) and category.lower() in ("essential", "pitfall"):
                value["kind"] = category.lower()
            if isinstance(value.get("weight"), int | float) and value["weight"] < 0:
                value["weight"], value["kind"] = -value["weight"], "pitfall"
        return value


CHECKLIST_EXAMPLE = [
    {"text": "States the final answer, 42.", "weight": 1.0, "kind": "essential"},
    {"text": "Shows how the answer was computed.", "weight": 0.7},
    {"text": "Is at most three sentences long.", "weight": 0.3},
    {"text": "Contradicts itself about the answer.", "weight": 0.9, "kind": "pitfall"},
]


class ChecklistParams(JudgeBackendParams):
    """Rubrics as Rewards (RaR explicit aggregation; RuscaRL grades the same way): a judge marks each
    checklist item met or not, and the reward is the weighted share of items met,
    (sum of met items' weights - sum of committed pitfalls' weights) / sum of non-pitfall weights,
    clipped to [0, 1]. items holds one checklist for every row; items_field names a row field with the
    row's own checklist (RaR's per-prompt rubrics), used where the row has one. Each item's verdict is in
    the explanation. Example items: [{"text": "States the final answer, 42.", "weight": 1, "kind":
    "essential"}, {"text": "Shows how it was computed.", "weight": 0.7}, {"text": "Contradicts itself.",
    "weight": 0.9, "kind": "pitfall"}]."""

    items: list[ChecklistItem] = Field(
        default_factory=list,
        max_length=50,
        description='Checklist items: objects {"text", "weight", "kind"} (kind normal, essential or pitfall), '
        "or plain strings (normal, weight 1).",
        examples=[CHECKLIST_EXAMPLE],
    )
    items_field: str = Field(
        "", description="Row field holding the row's own checklist (wins over items when present)."
    )
    grading: Literal["one_call", "per_item"] = Field(
        "one_call",
        description="one_call: one judge call per response grades every item (JSON verdicts); "
        "per_item: one call per item (more calls, each a simpler question).",
    )
    essential_gate: bool = Field(
        False, description="A response that misses an essential item scores 0 (a veto; RaR only weights essentials)."
    )
    show_reference: bool = Field(False, description="Show the judge the row's reference answer.")
    reference_field: str = Field("answer", description="Row field with the reference answer (show_reference).")
    timeout_s: float = _timeout_field()
    max_tokens: int = _max_tokens_field(1024)

    @model_validator(mode="after")
    def _has_items(self) -> ChecklistParams:
        if not self.items and not self.items_field:
            raise ValueError("give checklist items, or items_field naming the row field that holds them")
        return self


FLAW_RUBRIC = (
    "The final answer is correct. Check whether the reasoning that reaches it is sound. It is flawed when it "
    "guesses the answer, skips a step that the conclusion needs (jump in reasoning), makes errors that happen "
    "to cancel out, or states a conclusion that its own work does not support."
)


class FlawedPositiveParams(JudgeBackendParams):
    """FAPO: a correct answer reached by flawed reasoning earns less. The answer is checked against the
    reference first (math_equiv, or the boxed / last-line answer equal to it); only correct completions go
    to the judge, which reads the reasoning split into numbered steps and answers JSON {"flawed": true,
    "first_error_step": 3, "reason": "..."}. Score: 1 correct and sound, 1 - penalty correct and flawed,
    0 wrong. penalty 0.5 on this 0-1 scale is FAPO's lambda = 1 on its +1/-1 scale (a flawed positive
    sits halfway). Example: {"model": "Qwen/Qwen3-8B", "answer_check": "math_equiv", "penalty": 0.5}."""

    reference_field: str = Field("answer", description="Row field holding the gold answer.")
    answer_check: Literal["math_equiv", "boxed", "last_line"] = Field(
        "math_equiv",
        description="math_equiv: equal by math-verify; boxed / last_line: the last \\boxed{} or the last line "
        "equals the reference (exact_match's normalisation).",
    )
    penalty: float = Field(0.5, ge=0, le=1, description="Subtracted from 1 for a correct answer with flawed reasoning.")
    rubric: str = Field(FLAW_RUBRIC, min_length=1, description="What counts as flawed reasoning, as the judge is told.")
    timeout_s: float = _timeout_field()
    max_tokens: int = _max_tokens_field(512)


class RewardModelParams(Params):
    """A sequence-classification reward model scores (prompt, completion), rendered with the model's chat
    template (prompt as the user turn, completion as the assistant turn), in batches on the worker's device
    (CUDA when there is one), loaded once per process. Score mapping: sigmoid(logit) (the Bradley-Terry
    probability of beating a response of logit 0), the raw logit (unbounded), or minmax:
    (logit - logit_min) / (logit_max - logit_min) clipped to [0, 1].
    Example: {"model": "/models/Skywork-Reward-V2-Qwen3-0.6B", "score": "sigmoid"}."""

    model: str = Field(
        ...,
        min_length=1,
        description="Local folder (save_pretrained layout) of a sequence-classification model, or its hub id "
        "(downloaded when the workers can reach the Hub).",
        json_schema_extra=marks(MODEL),
    )
    score: Literal["sigmoid", "raw", "minmax"] = Field("sigmoid", description="How the logit becomes the score.")
    logit_min: float = Field(-5.0, description="Logit that maps to 0 (score=minmax).")
    logit_max: float = Field(5.0, description="Logit that maps to 1 (score=minmax).")
    label_index: int = Field(0, ge=0, description="Which output logit is the reward (0 for one-label reward models).")
    batch_size: int = Field(8, ge=1, le=512, description="Sequences per forward pass.")
    max_length: int = Field(
        4096,
        ge=16,
        le=131072,
        description="Longest sequence in tokens; longer ones lose their start (the end is scored).",
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="Weights' dtype.")
    allow_untrained_head: bool = Field(
        False,
        description="Load a folder without a trained score head (a causal LM) with a head initialised from seed 0: "
        "for testing the plumbing only, its scores mean nothing. Off: such a folder is refused.",
    )

    @model_validator(mode="after")
    def _logit_range(self) -> RewardModelParams:
        if self.logit_max <= self.logit_min:
            raise ValueError(f"logit_max ({self.logit_max:g}) must be above logit_min ({self.logit_min:g})")
        return self


class AnswerExtractParams(Params):
    """The answer-extraction options exact_match has, shared by the kinds below that compare answers."""

    extract: Literal["full", "last_line", "boxed", "after_marker", "regex", "last_number"] = Field(
        "full", description="Which part of the completion is the answer."
    )
    marker: str = Field("Answer:", description="Text after which the answer starts (extract=after_marker).")
    pattern: str = Field("", description="Regex whose first group is the answer (extract=regex).")

    _pattern_compiles = field_validator("pattern")(_compiles)

    def warnings(self) -> dict[str, str]:
        found = warnings_for(self.pattern) if self.extract == "regex" else []
        return {"pattern": found[0]} if found else {}

    @model_validator(mode="after")
    def _extract_needs_its_option(self) -> AnswerExtractParams:
        if self.extract == "regex" and not self.pattern:
            raise ValueError("extract='regex' needs a pattern")
        if self.extract == "after_marker" and not self.marker:
            raise ValueError("extract='after_marker' needs a marker")
        return self


class TextSimilarityParams(AnswerExtractParams):
    """Similarity of the completion (or its extracted answer) to a reference text, in [0, 1], as OpenAI's
    text_similarity grader scores it: fuzzy_match (rapidfuzz), bleu (sacrebleu), rouge_1..rouge_5 and
    rouge_l (rouge-score F-measure). With a pass threshold the score is 1 at or above it, else 0.
    Example: {"metric": "rouge_l", "reference_field": "summary"}."""

    reference_field: str = Field("answer", description="Row field holding the reference text.")
    metric: Literal["fuzzy_match", "bleu", "rouge_1", "rouge_2", "rouge_3", "rouge_4", "rouge_5", "rouge_l"] = Field(
        "fuzzy_match",
        description="fuzzy_match: rapidfuzz ratio / 100; bleu: sacrebleu sentence BLEU / 100; "
        "rouge_*: rouge-score F-measure (English words: other scripts tokenise to nothing).",
    )
    fuzzy_scorer: Literal["ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio", "WRatio"] = Field(
        "ratio", description="rapidfuzz scorer for fuzzy_match (OpenAI does not say which it uses)."
    )
    rouge_stemmer: bool = Field(False, description="Porter-stem words before ROUGE (rouge-score's use_stemmer).")
    pass_threshold: float | None = Field(
        None, ge=0, le=1, description="Score 1 when the similarity is at least this, else 0; empty: the similarity."
    )


class MajorityVoteParams(AnswerExtractParams):
    """Label-free (TTRL): 1 when the completion's answer equals the majority answer of its group (the
    completions of one prompt), else 0; no reference needed. Ties go to the answer given first in the
    group. Optional EVOL-RL novelty: how unlike the group's other completions this one is, rescaled to
    [0, 1] within the majority and within the minority, weighted by novelty_weight. EVOL-RL's own rewards:
    {"extract": "boxed", "scale": "signed", "novelty_weight": 0.5}."""

    extract: Literal["full", "last_line", "boxed", "after_marker", "regex", "last_number"] = Field(
        "boxed", description="Which part of the completion is the answer voted on."
    )
    compare: Literal["math", "text"] = Field(
        "math",
        description="math: answers equal by math-verify, as math_equiv compares (1/2 = 0.5); "
        "text: equal after collapsing whitespace and case.",
    )
    novelty_weight: float = Field(
        0.0, ge=0, le=1, description="Weight of the novelty term (0: plain majority vote; EVOL-RL uses 0.5)."
    )
    scale: Literal["zero_one", "signed"] = Field(
        "zero_one",
        description="zero_one: majority 1 + w*novelty, minority 0 + w*novelty, no answer 0. "
        "signed (EVOL-RL): majority 1 - w + w*novelty in [1-w, 1], minority -1 + w*novelty, no answer -1.",
    )
    timeout_s: float = Field(5.0, gt=0, le=60, description="math-verify time limit per parse or comparison.")


class CalibrationParams(AnswerExtractParams):
    """RLCR ("Beyond Binary Rewards"): the completion states its confidence q in [0, 1]; with c = 1 when its
    answer matches the reference (else 0), the score is c + 1 - (q - c)^2 (rlcr: correctness plus the
    Brier term, as the authors' code sums them), or 1 - (q - c)^2 alone (brier). A missing, unparseable or
    out-of-range confidence scores 0, as the authors' format check makes it. Example: a prompt asking for
    <answer>...</answer><confidence>0.8</confidence> and {"extract": "regex", "pattern": "<answer>(.*?)</answer>"}."""

    extract: Literal["full", "last_line", "boxed", "after_marker", "regex", "last_number"] = Field(
        "regex", description="Which part of the completion is the answer."
    )
    pattern: str = Field(
        r"<answer>(.*?)</answer>", description="Regex whose first group is the answer (extract=regex)."
    )
    reference_field: str = Field("answer", description="Row field holding the expected answer.")
    compare: Literal["exact", "math"] = Field(
        "exact",
        description="exact: equal after collapsing whitespace and case; math: equal by math-verify (math_equiv's test).",
    )
    confidence_pattern: str = Field(
        r"<confidence>(.*?)</confidence>",
        description="Regex whose first group is the stated confidence (its last match).",
    )
    percent: bool = Field(False, description="The confidence is stated in percent (80 means 0.8).")
    reward: Literal["rlcr", "brier"] = Field(
        "rlcr", description="rlcr: correctness + (1 - (q - c)^2), in [0, 2]; brier: 1 - (q - c)^2 alone, in [0, 1]."
    )
    timeout_s: float = Field(5.0, gt=0, le=60, description="math-verify time limit (compare=math).")

    _confidence_compiles = field_validator("confidence_pattern")(_compiles)

    def warnings(self) -> dict[str, str]:
        found = {**super().warnings()}
        confidence = warnings_for(self.confidence_pattern)
        if confidence:
            found["confidence_pattern"] = confidence[0]
        return found


class VerifiersRewardParams(Params):
    """One reward function (or metric) of the run's verifiers environment, computed by the package's own
    code in its sandbox (trainers.rollout.environments.packages)."""

    function: str = Field(
        "",
        pattern=r"^([A-Za-z_][A-Za-z0-9_]*)?$",
        description="The task's reward function or metric; empty: every one of them, each a criterion of its own "
        "with the package's weight times this criterion's (filled in when the run starts).",
    )
    environment: dict[str, Any] = Field(
        default_factory=dict,
        description="The verifiers environment's settings; empty: the run's environment (filled in when it starts).",
    )


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

# Answer-comparing kinds of the second wave (text similarity, label-free majority vote, calibration).
for _kind, _model in (
    ("text_similarity", TextSimilarityParams),
    ("majority_vote", MajorityVoteParams),
    ("calibration", CalibrationParams),
):
    CRITERION_KINDS.register(_kind)(_model)

# Model- and judge-based kinds of the second wave (reward model, group and pairwise judges, checklists, FAPO).
for _kind, _model in (
    ("reward_model", RewardModelParams),
    ("group_judge", GroupJudgeParams),
    ("pairwise_judge", PairwiseJudgeParams),
    ("checklist", ChecklistParams),
    ("flawed_positive", FlawedPositiveParams),
):
    CRITERION_KINDS.register(_kind)(_model)

# Criteria computed by an environment package's own code (verifiers tasksets' rewards and metrics).
CRITERION_KINDS.register("verifiers")(VerifiersRewardParams)


def params_model(kind: str) -> type[Params]:
    """The parameters model of a criterion kind; `UnknownNameError` (a ValueError) listing the kinds."""
    return CRITERION_KINDS.get(kind)
