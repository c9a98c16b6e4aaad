"""Write a run's prompts once: RunPrompt rows found or created by content digest."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from studio.runs import texts
from studio.runs.models import PROMPT_PREVIEW_CHARS, RunPrompt


def digest(content: Any) -> str:
    """sha256 of the content as canonical JSON: the same messages give the same digest on any database."""
    canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def preview(content: Any) -> str:
    """The start of the last user message (the question, usually), on one line."""
    text = content
    if isinstance(content, list):
        users = [m for m in content if isinstance(m, dict) and m.get("role") == "user"]
        text = texts.plain(users[-1:] or content[-1:])
    # Collapse whitespace over a bounded head only: the content may be megabytes long.
    head = str(text)[: PROMPT_PREVIEW_CHARS * 4]
    return " ".join(head.split())[:PROMPT_PREVIEW_CHARS]


def new_prompt(run_id: int, content: Any, content_digest: str | None = None) -> RunPrompt:
    return RunPrompt(
        run_id=run_id,
        digest=content_digest or digest(content),
        content=content,
        chars=texts.chars(content),
        preview=preview(content),
    )


def upsert(run_id: int, contents: list[Any]) -> list[RunPrompt]:
    """The run's RunPrompt of each content, in order, created where the run has none yet.

    Two queries when every prompt is known, three when some are new, however many contents.
    The rows come back without their content loaded (deferred): callers need the id and preview.
    """
    by_object: dict[int, str] = {}  # a group's samples share one prompt object: hash it once
    for c in contents:
        if id(c) not in by_object:
            by_object[id(c)] = digest(c)
    digests = [by_object[id(c)] for c in contents]
    first = dict(zip(digests, contents, strict=True))  # one row per distinct content
    known = _by_digest(run_id, first)
    missing = [new_prompt(run_id, c, d) for d, c in first.items() if d not in known]
    if missing:
        # ignore_conflicts: a concurrent writer of the same run (a retried flush) may have made it
        # since; either way it exists afterwards, and the read below finds it with its id.
        RunPrompt.objects.bulk_create(missing, ignore_conflicts=True)
        known.update(_by_digest(run_id, [m.digest for m in missing]))
    return [known[d] for d in digests]


def _by_digest(run_id: int, digests) -> dict[str, RunPrompt]:
    rows = RunPrompt.objects.filter(run_id=run_id, digest__in=list(digests)).defer("content")
    return {row.digest: row for row in rows}
