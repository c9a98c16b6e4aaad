"""The tokens that go between two model turns: what the chat template adds after the model's turn
(closing it, the observation messages, opening the next assistant turn), as token ids.

Sampled tokens are never re-tokenised (decode-then-encode drifts: " 12" may come back as " 1" "2"),
so the context of the next turn is `prompt ids + every token so far`; only this *delta* is
rendered. The template is applied to a stand-in conversation ending in an assistant turn, and
the text it adds after that turn is the delta. Plain Python, no torch.
"""

from __future__ import annotations

from typing import Any

from trainers.episodes import Message

_USER, _ASSISTANT = "\x00user-stand-in\x00", "\x00assistant-stand-in\x00"
_PLAIN_SEPARATOR = "\n\n"  # between messages when the tokenizer has no chat template (as `encode_chat`)


def observation_token_ids(tokenizer: Any, observation: list[Message], last_token: int | None) -> list[int]:
    """Token ids that close the assistant turn ending in `last_token` (the part of the template's
    closing not already sampled: after an EOS such as `<|im_end|>` only its newline is left; after
    a stop string or a cut turn, all of it), then the observation messages, then the generation
    prompt of the next assistant turn."""
    closing, rest = _template_pieces(tokenizer, observation)
    if last_token is not None and last_token in set(tokenizer.all_special_ids):
        emitted = tokenizer.decode([last_token], skip_special_tokens=False)
        if emitted and closing.startswith(emitted):
            closing = closing[len(emitted) :]
    return tokenizer(closing + rest, add_special_tokens=False).input_ids


def _template_pieces(tokenizer: Any, observation: list[Message]) -> tuple[str, str]:
    """(the text closing an assistant turn, the observation + next generation prompt) as text."""
    if not getattr(tokenizer, "chat_template", None):
        return "", _PLAIN_SEPARATOR + _PLAIN_SEPARATOR.join(m["content"] for m in observation) + _PLAIN_SEPARATOR
    head = [{"role": "user", "content": _USER}, {"role": "assistant", "content": _ASSISTANT}]
    closed = tokenizer.apply_chat_template(head, tokenize=False)
    full = tokenizer.apply_chat_template(head + list(observation), tokenize=False, add_generation_prompt=True)
    if not full.startswith(closed) or _ASSISTANT not in closed:
        raise ValueError(
            "the chat template renders an earlier assistant turn differently once messages follow it; "
            "observation tokens cannot be appended to the sampled ones"
        )
    return closed[closed.index(_ASSISTANT) + len(_ASSISTANT) :], full[len(closed) :]
