"""A run's prompts: the dataset's rows (or a procedural task's held-out rows) mapped per `DataSpec`,
then rendered through the chat template and tokenised."""

from __future__ import annotations

import contextlib
import re
import sys
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from trainers.data.procedural.rows import held_out_rows
from trainers.data.readers import DataError, RowError, iter_records
from trainers.data.rows import FieldMapping, PromptRow, map_row
from trainers.spec import DataSpec


@dataclass(frozen=True)
class Hint:
    """The start of a reference solution given as the start of the answer (trainers.curriculum.hints)."""

    text: str
    fraction: float  # of the solution's tokens
    num_tokens: int


@dataclass(frozen=True)
class Prompt:
    """A row rendered for the model: `text` after the chat template, and its token ids. A hinted
    prompt's text and ids end with the hint's, so the completion starts after it."""

    row: PromptRow
    text: str
    token_ids: list[int] = field(repr=False)
    hint: Hint | None = None
    max_tokens: int | None = None  # data.max_prompt_tokens: an environment's own first messages keep to it too

    @property
    def id(self) -> str:
        return self.row.id


def load_rows(spec: DataSpec) -> list[PromptRow]:
    """Rows of the dataset mapped per `spec` (prompt or messages, answer, extra fields). Read as a
    stream: only the mapped rows are kept, and reading stops at `limit` (counting every row of the
    file). The first bad row fails, or with `skip_invalid_rows` is left out (then at least one row
    must be good). Procedural data has no file: its rows are the held-out set (what an evaluation
    scores; a training run draws from the pools instead, see trainers.data.procedural.source)."""
    if spec.procedural is not None:
        return held_out_rows(spec.procedural)[: spec.limit]
    if spec.path is None:  # environment_dataset: a run's start reads them (environments.packages.prepare)
        raise DataError("the prompts are the environment's tasks, read when the run starts")
    path = Path(spec.path)
    mapping = FieldMapping.of(spec)
    rows: list[PromptRow] = []
    skipped: list[RowError] = []
    for row, record in islice(iter_records(path, spec.format, spec.split), spec.limit):
        try:
            if isinstance(record, RowError):
                raise record
            rows.append(map_row(path.name, row, record, mapping))
        except RowError as exc:
            if not spec.skip_invalid_rows:
                raise
            skipped.append(exc)
    if not rows and skipped:
        raise DataError(f"{path.name}: none of its {len(skipped):,} rows can be used (skip_invalid_rows leaves "
                        f"out the invalid ones); the first: {skipped[0]}")  # fmt: skip
    if not rows:
        raise DataError(f"{path.name}: the dataset has no rows")
    return rows


def render_prompt(row: PromptRow, tokenizer, spec: DataSpec) -> Prompt:
    """Chat template when the tokenizer has one and the spec asks for it; plain text otherwise.
    Prompts longer than `max_prompt_tokens` keep their end (the question is usually last)."""
    messages = row.prompt if isinstance(row.prompt, list) else [{"role": "user", "content": row.prompt}]
    if spec.system_prompt and messages[0]["role"] != "system":
        messages = [{"role": "system", "content": spec.system_prompt}, *messages]
    text, ids = encode_chat(tokenizer, messages, use_chat_template=spec.use_chat_template)
    return Prompt(row=row, text=text, token_ids=ids[-spec.max_prompt_tokens :], max_tokens=spec.max_prompt_tokens)


def encode_chat(tokenizer, messages: list[dict[str, str]], *, use_chat_template: bool = True) -> tuple[str, list[int]]:
    """(text, token ids) of `messages` with the assistant turn opened: through the tokenizer's chat
    template when it has one (and it is wanted), else the contents joined by blank lines. Message
    contents are tokenised as text (`text_ids`): only the template itself makes special tokens."""
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        spans = template_spans(tokenizer, messages, add_generation_prompt=True)
        return "".join(t for t, _ in spans), spans_ids(tokenizer, spans)  # the template already holds the specials
    text = "\n\n".join(m["content"] for m in messages)
    return text, tokenizer(text, split_special_tokens=True).input_ids


# ---------------------------------------------------------------- content stays text
#
# A tool, an environment or a user may write the template's own markers ("<|im_end|>", a role
# header): tokenised with the template's text they would become its special tokens and forge a
# turn. So the template is rendered with a placeholder for each message's content, and the spans
# between placeholders (the template's) are tokenised as usual while each content is tokenised as
# text: special tokens split (`split_special_tokens=True`), and an added token the template itself
# writes (the tiny agent model's "<|tool|>", Qwen's "</tool_response>") broken after its first
# character. Byte-level BPE: the ids decode to the same text.

_EVERY_ROLE = [{"role": role, "content": "x"} for role in ("system", "user", "assistant", "tool")]
_SLOT = "\x00rollout-content-{}\x00"
_SLOTS = re.compile("(\x00rollout-content-\\d+\x00)")


def template_spans(tokenizer, messages: list[dict], **template_kwargs) -> list[tuple[str, bool]]:
    """The chat template's rendering of `messages` as (text, is a message's content) spans, in
    order; joined, the spans are exactly `apply_chat_template(messages, tokenize=False)`. A
    template that changes a content (strips it, splits it) has that content found in its
    rendering instead; `ValueError` when a content holding special-token text cannot be found."""
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, **template_kwargs)
    stand_ins = [{**m, "content": _SLOT.format(i)} for i, m in enumerate(messages)]
    with_slots = tokenizer.apply_chat_template(stand_ins, tokenize=False, **template_kwargs)
    spans: list[tuple[str, bool]] = []
    seen: list[int] = []
    for part in _SLOTS.split(with_slots):
        if _SLOTS.fullmatch(part):
            seen.append(int(part.strip("\x00").rsplit("-", 1)[1]))
            spans.append((str(messages[seen[-1]]["content"]), True))
        elif part:
            spans.append((part, False))
    if seen == list(range(len(messages))) and "".join(t for t, _ in spans) == rendered:
        return [(t, c) for t, c in spans if t]
    return _found_spans(tokenizer, messages, rendered)


def _found_spans(tokenizer, messages: list[dict], rendered: str) -> list[tuple[str, bool]]:
    """Each content found in the rendering, in order (for templates that do not place a content as given)."""
    spans: list[tuple[str, bool]] = []
    at = 0
    markers = protected_markers(tokenizer, rendered)
    for i, message in enumerate(messages):
        content = str(message["content"])
        found = -1
        for candidate in (content, content.strip()):
            found = rendered.find(candidate, at) if candidate else -1
            if found >= 0:
                content = candidate
                break
        if found < 0:
            if any(m in content for m in markers):
                raise ValueError(
                    f"the chat template changes message {i}'s content, which holds special-token text: "
                    "it cannot be kept as text"
                )
            continue  # no marker text in it: the template's rendering of it is safe as it is
        spans += [(rendered[at:found], False), (content, True)]
        at = found + len(content)
    spans.append((rendered[at:], False))
    return [(t, c) for t, c in spans if t]


def spans_ids(tokenizer, spans: list[tuple[str, bool]]) -> list[int]:
    """Token ids of template spans: the template's own text as the tokenizer reads it (its markers
    are special tokens), each content as text (`text_ids`)."""
    template = "".join(t for t, c in spans if not c)
    markers = protected_markers(tokenizer, template)
    ids: list[int] = []
    for text, is_content in spans:
        if is_content:
            ids += text_ids(tokenizer, text, markers)
        else:
            ids += tokenizer(text, add_special_tokens=False).input_ids
    return ids


def protected_markers(tokenizer, template_text: str) -> set[str]:
    """Token strings that content must never become: every special token, and every added token
    the template writes itself."""
    if getattr(tokenizer, "chat_template", None):
        # Every role's markers, not only those of the messages at hand (a template refusing the
        # probe, as one that knows no tool role, leaves the text at hand).
        with contextlib.suppress(Exception):
            template_text += tokenizer.apply_chat_template(_EVERY_ROLE, tokenize=False, add_generation_prompt=True)
    special = set(getattr(tokenizer, "all_special_tokens", []))
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    special |= {tok.content for tok in decoder.values() if getattr(tok, "special", False)}
    added = {tok.content for tok in decoder.values()}
    return {m for m in special if len(m) > 1} | {m for m in added if len(m) > 1 and m in template_text}


def text_ids(tokenizer, text: str, markers: set[str]) -> list[int]:
    """`text` tokenised as text: it never yields one of `markers` (nor any special token)."""
    cuts: set[int] = set()
    for marker in markers:
        at = text.find(marker)
        while at >= 0:
            cuts.add(at + 1)  # broken after its first character: neither half is the marker
            at = text.find(marker, at + 1)
    bounds = [0, *sorted(cuts), len(text)]
    ids: list[int] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        if end > start:
            ids += tokenizer(text[start:end], add_special_tokens=False, split_special_tokens=True).input_ids
    return ids


def load_prompts(spec: DataSpec, tokenizer) -> list[Prompt]:
    return [render_prompt(row, tokenizer, spec) for row in load_rows(spec)]


def prompt_lengths_over(prompts: list[Prompt], tokenizer, data: DataSpec) -> list[int]:
    """Full token lengths of the prompts longer than `data.max_prompt_tokens` (those were cut to it).
    Only prompts at the cap can have been cut, so only those are tokenised again, uncut."""
    cap = data.max_prompt_tokens
    uncut = data.model_copy(update={"max_prompt_tokens": sys.maxsize})  # a copy: no bound check needed
    lengths = (len(render_prompt(p.row, tokenizer, uncut).token_ids) for p in prompts if len(p.token_ids) == cap)
    return [n for n in lengths if n > cap]


def cut_prompts_warning(prompts: list[Prompt], tokenizer, data: DataSpec) -> str | None:
    """A warning when prompts are cut to max_prompt_tokens (their start is dropped, and the model
    never sees it): how many, and the longest, so the setting can be raised or the data fixed."""
    over = prompt_lengths_over(prompts, tokenizer, data)
    if not over:
        return None
    return (
        f"{len(over)} of {len(prompts)} prompts are longer than data.max_prompt_tokens "
        f"({data.max_prompt_tokens}) and are cut to their last {data.max_prompt_tokens} tokens; "
        f"the longest has {max(over)} tokens"
    )
