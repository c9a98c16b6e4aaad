"""The tokens that go between two model turns: what the chat template adds after the model's turn
(closing it, the observation messages, opening the next assistant turn), as token ids.

Sampled tokens are never re-tokenised (decode-then-encode drifts: " 12" may come back as " 1" "2"),
so the context of the next turn is `prompt ids + every token so far`; only this *delta* is
rendered. The template is applied to a stand-in conversation ending in an assistant turn, and
the text it adds after that turn is the delta. Plain Python, no torch.
"""

from __future__ import annotations

from typing import Any

from trainers.data.prompts import spans_ids, template_spans
from trainers.episodes import Message

_USER, _ASSISTANT = "\x00user-stand-in\x00", "\x00assistant-stand-in\x00"
_PLAIN_SEPARATOR = "\n\n"  # between messages when the tokenizer has no chat template (as `encode_chat`)


def observation_token_ids(tokenizer: Any, observation: list[Message], last_token: int | None) -> list[int]:
    """Token ids that close the assistant turn ending in `last_token` (the part of the template's
    closing not already sampled: after an EOS such as `<|im_end|>` only its newline is left; after
    a stop string or a cut turn, all of it), then the observation messages, then the generation
    prompt of the next assistant turn. The observation's contents are tokenised as text: a tool
    printing the template's markers never makes its special tokens (`trainers.data.prompts.text_ids`)."""
    closing, rest = _template_pieces(tokenizer, observation)
    if last_token is not None and last_token in set(tokenizer.all_special_ids):
        emitted = tokenizer.decode([last_token], skip_special_tokens=False)
        if emitted and closing.startswith(emitted):
            closing = closing[len(emitted) :]
    if rest and not rest[0][1]:
        rest = [(closing + rest[0][0], False), *rest[1:]]
    elif closing:
        rest = [(closing, False), *rest]
    return spans_ids(tokenizer, rest)


def _template_pieces(tokenizer: Any, observation: list[Message]) -> tuple[str, list[tuple[str, bool]]]:
    """(the text closing an assistant turn, the observation + next generation prompt as
    (text, is a message's content) spans)."""
    if not getattr(tokenizer, "chat_template", None):
        spans: list[tuple[str, bool]] = [(_PLAIN_SEPARATOR, False)]
        for i, message in enumerate(observation):
            spans += [(_PLAIN_SEPARATOR, False)] if i else []
            spans.append((message["content"], True))
        return "", [*spans, (_PLAIN_SEPARATOR, False)]
    head = [{"role": "user", "content": _USER}, {"role": "assistant", "content": _ASSISTANT}]
    closed = tokenizer.apply_chat_template(head, tokenize=False)
    full = template_spans(tokenizer, head + list(observation), add_generation_prompt=True)
    if not "".join(t for t, _ in full).startswith(closed) or _ASSISTANT not in closed:
        raise ValueError(
            "the chat template renders an earlier assistant turn differently once messages follow it; "
            "observation tokens cannot be appended to the sampled ones"
        )
    return closed[closed.index(_ASSISTANT) + len(_ASSISTANT) :], _after(full, len(closed))


def _after(spans: list[tuple[str, bool]], skip: int) -> list[tuple[str, bool]]:
    """`spans` less their first `skip` characters."""
    out: list[tuple[str, bool]] = []
    for text, is_content in spans:
        if skip >= len(text):
            skip -= len(text)
            continue
        out.append((text[skip:], is_content))
        skip = 0
    return out
