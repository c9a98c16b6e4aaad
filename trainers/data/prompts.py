"""A run's prompts: the dataset's rows (or a procedural task's held-out rows) mapped per `DataSpec`,
then rendered through the chat template and tokenised."""

from __future__ import annotations

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

    @property
    def id(self) -> str:
        return self.row.id


def load_rows(spec: DataSpec) -> list[PromptRow]:
    """Rows of the dataset mapped per `spec` (prompt or messages, answer, extra fields). Read as a
    stream: only the mapped rows are kept, and reading stops at `limit`. The first bad row fails.
    Procedural data has no file: its rows are the held-out set (what an evaluation scores; a
    training run draws from the pools instead, see trainers.data.procedural.source)."""
    if spec.procedural is not None:
        return held_out_rows(spec.procedural)[: spec.limit]
    path = Path(spec.path)
    mapping = FieldMapping.of(spec)
    rows = []
    for row, record in islice(iter_records(path, spec.format, spec.split), spec.limit):
        if isinstance(record, RowError):
            raise record
        rows.append(map_row(path.name, row, record, mapping))
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
    return Prompt(row=row, text=text, token_ids=ids[-spec.max_prompt_tokens :])


def encode_chat(tokenizer, messages: list[dict[str, str]], *, use_chat_template: bool = True) -> tuple[str, list[int]]:
    """(text, token ids) of `messages` with the assistant turn opened: through the tokenizer's chat
    template when it has one (and it is wanted), else the contents joined by blank lines."""
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return text, tokenizer(text, add_special_tokens=False).input_ids  # the template already holds them
    text = "\n\n".join(m["content"] for m in messages)
    return text, tokenizer(text).input_ids


def load_prompts(spec: DataSpec, tokenizer) -> list[Prompt]:
    return [render_prompt(row, tokenizer, spec) for row in load_rows(spec)]
