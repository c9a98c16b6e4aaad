"""What the judge-based criterion kinds share: asking a judge model, reading its replies, and sending
a batch's judge calls out together.

- `JudgeClient`: chat completions from an OpenAI-compatible `/chat/completions` endpoint (plain HTTP
  with urllib, a batch's requests concurrently; the API key only to the server it is set for,
  trainers.access.key_server) or from a local transformers model (loaded once per
  process and kept; torch and transformers are imported only then; greedy, batched). `ask_all` never
  raises: each `Reply` holds the text or the error, in words.
- `JudgeCalls` and `JudgeCriterion`: a kind says, for one unit (a sample, or a group of samples for the
  group-relative kinds), which chats to send and how the replies become the unit's scores; the calls of
  every unit of a batch go out in one `ask_all`. A call that fails, or replies the kind cannot read,
  scores the whole unit 0 with the reason (and the reply) as the error.
- Reading replies: `reply_json` (a JSON object anywhere in the reply, after any <think> block) and
  `response_text` (what the judge is shown of a sample: its completion, or its whole transcript).
"""

from __future__ import annotations

import json
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from trainers.access import bound_to, key_server, key_server_variable
from trainers.data.prompts import encode_chat
from trainers.report import CriterionScore
from trainers.rewards.criteria.base import Criterion, clip_text, describe, failure, split_groups
from trainers.rewards.sample import Sample
from trainers.rollout.engines.base import SamplingParams
from trainers.spec import ModelSpec

MAX_CONCURRENT_REQUESTS = 8
# A judge reply quoted in an error is cut to this many characters.
REPLY_IN_ERROR = 300
# At most this many '{' positions are tried as the start of a JSON object (bounds the work on a long reply).
MAX_JSON_STARTS = 200

Chat = list[dict[str, str]]


class JudgeSettings(Protocol):
    """The settings a judge call reads (every judge kind's params have them)."""

    backend: str
    base_url: str
    api_key_env: str
    model: str
    timeout_s: float
    max_tokens: int


@dataclass(frozen=True)
class Reply:
    """One judge call's answer: the text, or why there is none."""

    text: str | None = None
    error: str | None = None


class JudgeClient:
    """Sends chats to the judge the settings name; see the module docstring."""

    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = settings

    @property
    def remote(self) -> bool:
        return self.settings.backend == "openai"

    def ask_all(self, chats: list[Chat]) -> list[Reply]:
        """One reply per chat, in order; failures are replies with an error, never exceptions."""
        if not chats:
            return []
        if not self.remote:
            try:
                return [Reply(text) for text in local_generate(self.settings, chats)]
            except Exception as exc:  # a judge that cannot load or run fails every call, with the reason
                error = f"local judge {self.settings.model!r} failed: {describe(exc)}"
                return [Reply(error=error) for _ in chats]
        with ThreadPoolExecutor(max_workers=max(1, min(len(chats), MAX_CONCURRENT_REQUESTS))) as pool:
            return list(pool.map(self._ask_guarded, chats))

    def _ask_guarded(self, chat: Chat) -> Reply:
        try:
            return Reply(self.ask(chat))
        except Exception as exc:  # one failed request is that call's error
            return Reply(error=describe(exc))

    def ask(self, messages: Chat) -> str:
        """One chat completion from the endpoint; errors say what the server answered."""
        p = self.settings
        body = {"model": p.model, "messages": messages, "max_tokens": p.max_tokens, "temperature": 0}
        headers = {"Content-Type": "application/json"}
        url = p.base_url.rstrip("/") + "/chat/completions"
        api_key = os.environ.get(p.api_key_env, "")
        if api_key:
            # The key goes only to the server its operator set it for, checked right before each request: a
            # rubric anyone may edit names the URL, and would otherwise receive the worker's key.
            server = key_server(p.api_key_env)
            if not bound_to(url, server):
                where = f"is set for {server}" if server else f"has no server ({key_server_variable(p.api_key_env)})"
                raise PermissionError(
                    f"the API key in {p.api_key_env} {where}, not {p.base_url}: not sent; the workers' operator sets "
                    f"{key_server_variable(p.api_key_env)} to the server the key is for, or the rubric names another "
                    f"variable (api_key_env)"
                )
            headers["Authorization"] = f"Bearer {api_key}"
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


# ---------------------------------------------------------------- the local judge

_LOCAL_MODELS: dict[str, tuple[Any, Any]] = {}
_LOCAL_LOCK = threading.Lock()


def local_judge(path: str) -> tuple[Any, Any]:
    """(model, tokenizer) for a local judge, loaded once per process and kept."""
    with _LOCAL_LOCK:
        if path not in _LOCAL_MODELS:
            from trainers.models.loading import load_causal_lm, load_tokenizer  # torch + transformers, only now

            model = load_causal_lm(path, ModelSpec(path=path))
            model.eval()
            _LOCAL_MODELS[path] = (model, load_tokenizer(path))
        return _LOCAL_MODELS[path]


def local_generate(settings: JudgeSettings, chats: list[Chat]) -> list[str]:
    """Greedy replies of the local judge, one per chat (batched by the transformers engine)."""
    from trainers.rollout.engines.hf import HFEngine  # torch + transformers, only for a local judge

    model, tokenizer = local_judge(settings.model)
    prompts = [encode_chat(tokenizer, chat)[1] for chat in chats]
    engine = HFEngine(model=model, tokenizer=tokenizer)
    generations = engine.generate(prompts, 1, SamplingParams(max_new_tokens=settings.max_tokens, temperature=0))
    return [group[0].text for group in generations]


# ---------------------------------------------------------------- units of judge calls


@dataclass
class JudgeCalls:
    """What one unit asks the judge (`chats`) and how the replies, in the same order, become one score
    per member of the unit (`read`; it may raise, which scores the unit 0 with the reason)."""

    chats: list[Chat]
    read: Callable[[list[str]], list[CriterionScore]]


def fixed(scores: list[CriterionScore]) -> JudgeCalls:
    """A unit that needs no judge call (a wrong answer FAPO does not send to the judge)."""
    return JudgeCalls([], lambda replies: scores)


def run_calls(
    client: JudgeClient, units: list[JudgeCalls | BaseException], sizes: list[int]
) -> list[list[CriterionScore]]:
    """Every unit's scores (`sizes[i]` of them); all units' chats go to the judge in one `ask_all`.
    A unit given as an exception (its calls could not be built) scores 0 with the reason."""
    chats = [chat for unit in units if isinstance(unit, JudgeCalls) for chat in unit.chats]
    replies = iter(client.ask_all(chats))
    out = []
    for unit, size in zip(units, sizes, strict=True):
        if not isinstance(unit, JudgeCalls):
            out.append([failure(describe(unit))] * size)
            continue
        got = [next(replies) for _ in unit.chats]
        out.append(_read(unit, got, size))
    return out


def _read(unit: JudgeCalls, replies: list[Reply], size: int) -> list[CriterionScore]:
    failed = [(i, r.error) for i, r in enumerate(replies) if r.error is not None]
    if failed:
        i, error = failed[0]
        where = f"judge call {i + 1} of {len(replies)} failed: " if len(replies) > 1 else ""
        return [failure(f"{where}{error}")] * size
    try:
        scores = unit.read([r.text or "" for r in replies])
        if len(scores) != size:
            raise RuntimeError(f"read {len(scores)} scores for {size} samples")
    except Exception as exc:  # an unreadable reply fails its unit, with the reply in the error
        return [failure(describe(exc))] * size
    return scores


class JudgeCriterion(Criterion):
    """Base of the judge kinds: `calls(unit)` builds a unit's `JudgeCalls`; a unit is one sample, or
    (with `grouped`) the samples of one group (`Sample.group`). Kinds that need the whole batch first
    (FAPO checks answers in one batch) override `score_batch` and use `run_calls` themselves."""

    grouped: ClassVar[bool] = False
    params: Any  # the kind's params model; it has the JudgeSettings fields

    def __init__(self, params: Any) -> None:
        super().__init__(params)
        self.client = JudgeClient(params)
        # HTTP waits overlap with other criteria; a local model computes in this process.
        self.runs_elsewhere = self.client.remote

    def calls(self, unit: list[Sample]) -> JudgeCalls:
        raise NotImplementedError

    def score_batch(self, samples: list[Sample]) -> list[CriterionScore]:
        units = split_groups(samples) if self.grouped else [[i] for i in range(len(samples))]
        built: list[JudgeCalls | BaseException] = []
        for members in units:
            try:
                built.append(self.calls([samples[i] for i in members]))
            except Exception as exc:  # a unit whose calls cannot be built (a missing row field) fails alone
                built.append(exc)
        found = run_calls(self.client, built, [len(m) for m in units])
        scores: list[CriterionScore | None] = [None] * len(samples)
        for members, unit_scores in zip(units, found, strict=True):
            for i, score in zip(members, unit_scores, strict=True):
                scores[i] = score
        return [s for s in scores if s is not None]

    def score_group(self, samples: list[Sample]) -> list[CriterionScore]:
        """One group's scores (GroupCriterion's interface, for the grouped kinds)."""
        return JudgeCriterion.score_batch(self, samples)


# ---------------------------------------------------------------- reading replies

_THINK_END = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)


class UnreadableReply(ValueError):
    """A reply that does not hold what the judge was asked for; the message quotes the reply."""

    def __init__(self, what: str, reply: str) -> None:
        super().__init__(f"{what}; the judge replied: {clip_text(reply.strip(), REPLY_IN_ERROR)!r}")


def after_thinking(reply: str) -> str:
    """The reply after a reasoning model's last </think> (the whole reply when it has none)."""
    parts = _THINK_END.split(reply)
    return parts[-1]


def reply_json(reply: str, key: str) -> dict[str, Any]:
    """The JSON object holding `key` in the judge's reply: the whole reply, a ```json block, or the first
    object found inside the text. `UnreadableReply` (quoting the reply) when there is none."""
    text = after_thinking(reply).strip()
    candidates = [text, *(m.group(1) for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and key in value:
            return value
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"\{", text)][:MAX_JSON_STARTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and key in value:
            return value
    raise UnreadableReply(f'no JSON object with "{key}" in the judge\'s reply', reply)


def as_number(value: Any, what: str, reply: str) -> float:
    """A JSON number (or numeric string) from the judge; UnreadableReply otherwise."""
    if isinstance(value, bool):
        raise UnreadableReply(f"{what} is {value!r}, not a number", reply)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UnreadableReply(f"{what} is {value!r}, not a number", reply) from None
    if number != number or number in (float("inf"), float("-inf")):
        raise UnreadableReply(f"{what} is {value!r}, not a finite number", reply)
    return number


def as_verdict(value: Any, what: str, reply: str) -> bool:
    """A yes/no from the judge: JSON true/false, or the words yes/no, true/false, met/not met."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("yes", "true", "met", "1"):
            return True
        if word in ("no", "false", "not met", "unmet", "0"):
            return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise UnreadableReply(f"{what} is {value!r}, not true or false", reply)


def normalised(raw: float, lo: float, hi: float) -> tuple[float, str]:
    """`raw` on the judge's scale [lo, hi] mapped to [0, 1] and clipped, with a note when it was clipped."""
    value = min(max((raw - lo) / (hi - lo), 0.0), 1.0)
    return value, ("" if lo <= raw <= hi else f" (outside [{lo:g}, {hi:g}], clipped)")


def response_text(sample: Sample) -> str:
    """What the judge reads of a sample: the completion, or for a multi-turn episode the whole
    conversation after the prompt (assistant turns and observations), one `role: text` block each."""
    if not sample.transcript:
        return sample.completion
    return "\n\n".join(f"{turn.get('role', 'assistant')}: {turn.get('content', '')}" for turn in sample.transcript)
