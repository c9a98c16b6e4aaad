"""A rollout's per-token data as the `logprobs` column holds it: the sampler's logprobs (a list, as runs and
ingested items have always stored them) or, when a teacher scored the completion (on-policy distillation,
trainers.update.teachers), {"sampled": that list or null, "teacher_tokens": [[token text, reverse KL or null],
...]}. One column, no migration; the API answers the two apart (`sampled`, `teacher_tokens`)."""

from __future__ import annotations

import math
from typing import Any

MAX_TOKENS = 32_768  # entries kept of a completion's teacher tokens (a completion is bounded by token_bounds)
MAX_PIECE_CHARS = 64  # one token's text, as the inspector shows it


def stored(logprobs: list[float] | None, teacher_tokens: list[list[Any]] | None) -> Any:
    """What the column holds for a reported rollout: the logprobs alone without teacher tokens, else both,
    the teacher tokens checked for type and size (a piece is text, a value a finite number or null)."""
    if not teacher_tokens:
        return logprobs
    pairs = []
    for item in teacher_tokens[:MAX_TOKENS]:
        piece, value = (item[0], item[1]) if isinstance(item, (list, tuple)) and len(item) == 2 else ("", None)
        finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        pairs.append([str(piece)[:MAX_PIECE_CHARS], float(value) if finite else None])
    return {"sampled": logprobs, "teacher_tokens": pairs}


def sampled(value: Any) -> list[float] | None:
    """The sampler's logprobs of a stored value."""
    return value.get("sampled") if isinstance(value, dict) else value


def teacher_tokens(value: Any) -> list[list[Any]] | None:
    """[[token text, reverse KL or null], ...] of a stored value; None when no teacher scored it."""
    return value.get("teacher_tokens") if isinstance(value, dict) else None
