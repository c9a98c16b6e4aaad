"""llm_judge: a judge model grades each completion against a written rubric.

The judge sees the rubric, the prompt, the reference answer (when the row has one) and the
completion, and is asked to end with `Score: N` (N from score_min to score_max). The last such
line in its reply is the score, normalised to [0, 1]; the reply itself is the explanation.
A reply without a score, an HTTP error or a timeout scores 0 with the error text.

Two back-ends:
- `openai`: any OpenAI-compatible `/chat/completions` endpoint (vLLM, llama.cpp, a hosted
  API) over plain HTTP with urllib; requests for a batch go out concurrently;
- `local`: a transformers model from a local folder, loaded on first use and cached per
  process (torch and transformers are imported only then), generating greedily in batches.
"""

from __future__ import annotations

import json
import os
import re
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trainers.data.prompts import encode_chat
from trainers.report import CriterionScore
from trainers.rewards.catalog import LLMJudgeParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, clip_text, failure
from trainers.rewards.sample import Sample
from trainers.rollout.engines.base import SamplingParams
from trainers.spec import ModelSpec

MAX_CONCURRENT_REQUESTS = 8
# "Score: 7", "score = 7.5", "**Score:** 7/10": the number after the last "score" label.
SCORE_PATTERN = re.compile(r"score[\s*]*[:=][\s*]*(-?\d+(?:\.\d+)?)", re.IGNORECASE)  # one class per gap: linear

SYSTEM_PROMPT = (
    "You are a careful, strict grader. Grade the response against the rubric. "
    "Write one or two sentences of justification, then end with a line of the form "
    "'Score: N' where N is a number from {lo:g} to {hi:g} ({hi:g} is best)."
)


def judge_messages(params: LLMJudgeParams, sample: Sample) -> list[dict[str, str]]:
    """The chat the judge receives for one sample."""
    parts = [f"# Rubric\n{params.rubric}", f"# Prompt\n{sample.prompt_text}"]
    if sample.fields.get("answer") is not None:
        parts.append(f"# Reference answer\n{sample.fields['answer']}")
    parts.append(f"# Response to grade\n{sample.completion}")
    return [
        {"role": "system", "content": SYSTEM_PROMPT.format(lo=params.score_min, hi=params.score_max)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def parse_score(reply: str, params: LLMJudgeParams) -> CriterionScore:
    """The judge's last `Score: N`, mapped from [score_min, score_max] to [0, 1] (clipped)."""
    found = SCORE_PATTERN.findall(reply)
    if not found:
        return failure(f"no 'Score: N' in the judge's reply: {clip_text(reply.strip(), 200)!r}")
    raw = float(found[-1])
    lo, hi = params.score_min, params.score_max
    normalised = min(max((raw - lo) / (hi - lo), 0.0), 1.0)
    note = "" if lo <= raw <= hi else f" (outside [{lo:g}, {hi:g}], clipped)"
    return CriterionScore(normalised, clip_text(f"judge: {raw:g}/{hi:g}{note}. {reply.strip()}"))


@CRITERIA.register("llm_judge")
class LLMJudge(Criterion):
    params_model = LLMJudgeParams
    params: LLMJudgeParams

    def __init__(self, params: LLMJudgeParams) -> None:
        super().__init__(params)
        # HTTP waits overlap with other criteria; a local model computes in this process.
        self.runs_elsewhere = params.backend == "openai"

    def score_batch(self, samples: list[Sample]) -> list[CriterionScore]:
        if self.params.backend == "local":
            return self._score_local(samples)
        with ThreadPoolExecutor(max_workers=max(1, min(len(samples), MAX_CONCURRENT_REQUESTS))) as pool:
            return list(pool.map(self._score_guarded, samples))

    def score_one(self, sample: Sample) -> CriterionScore:
        return parse_score(self._ask(judge_messages(self.params, sample)), self.params)

    def _ask(self, messages: list[dict[str, str]]) -> str:
        """One chat completion from the endpoint; errors say what the server answered."""
        p = self.params
        body = {"model": p.model, "messages": messages, "max_tokens": p.max_tokens, "temperature": 0}
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(p.api_key_env, "")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        url = p.base_url.rstrip("/") + "/chat/completions"
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=p.timeout_s) as response:
                data = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:200]
            raise RuntimeError(f"judge endpoint {url} answered HTTP {exc.code}: {detail}") from None
        except TimeoutError:
            raise TimeoutError(f"judge endpoint {url} did not answer within {p.timeout_s:g} s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise TimeoutError(f"judge endpoint {url} did not answer within {p.timeout_s:g} s") from None
            raise ConnectionError(f"cannot reach judge endpoint {url}: {exc.reason}") from None
        try:
            return str(data["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"judge endpoint {url} sent no choices[0].message.content: {str(data)[:200]}") from None

    def _score_local(self, samples: list[Sample]) -> list[CriterionScore]:
        try:
            replies = local_generate(self.params, [judge_messages(self.params, s) for s in samples])
        except Exception as exc:  # a judge that cannot load or run fails every sample, with the reason
            return [failure(f"local judge {self.params.model!r} failed: {type(exc).__name__}: {exc}") for _ in samples]
        return [parse_score(reply, self.params) for reply in replies]


_LOCAL_MODELS: dict[str, tuple[Any, Any]] = {}
_LOCAL_LOCK = threading.Lock()


def local_judge(path: str) -> tuple[Any, Any]:
    """(model, tokenizer) for a local judge, loaded once per process and kept."""
    with _LOCAL_LOCK:
        if path not in _LOCAL_MODELS:
            from trainers.models import load_causal_lm, load_tokenizer  # torch + transformers, only now

            model = load_causal_lm(path, ModelSpec(path=path))
            model.eval()
            _LOCAL_MODELS[path] = (model, load_tokenizer(path))
        return _LOCAL_MODELS[path]


def local_generate(params: LLMJudgeParams, chats: list[list[dict[str, str]]]) -> list[str]:
    """Greedy replies of the local judge, one per chat (batched by the transformers engine)."""
    from trainers.rollout.engines.hf import HFEngine  # torch + transformers, only for a local judge

    model, tokenizer = local_judge(params.model)
    prompts = [encode_chat(tokenizer, chat)[1] for chat in chats]
    engine = HFEngine(model=model, tokenizer=tokenizer)
    generations = engine.generate(prompts, 1, SamplingParams(max_new_tokens=params.max_tokens, temperature=0))
    return [group[0].text for group in generations]
