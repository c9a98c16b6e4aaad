"""The step's guidance rows: a reference solution for each prompt whose samples all failed
(`algorithm.guidance_coef`; the loss term is `trainers.algorithms.guidance`).

A row is the prompt's token ids followed by the solution's, tokenised as text (it never becomes
one of the template's special tokens) and ended with the tokenizer's end-of-sequence token, which
is how a sampled answer ends. Each prompt gets one row per step, however often it was drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from trainers.data.prompts import Prompt, protected_markers, text_ids
from trainers.rewards.sample import RubricResult
from trainers.spec.algorithm import AlgorithmSpec
from trainers.update.batches import TokenBatch

if TYPE_CHECKING:
    import torch


class _Scored(Protocol):
    prompt: Prompt
    results: list[RubricResult]


def guidance_rows(
    groups: Sequence[_Scored], tokenizer, field: str, passes: Callable[[list[RubricResult]], list[bool]]
) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt ids, solution ids) of each failed group's prompt (no sample passing, by `passes`,
    the curriculum's one pass rule) whose row has a non-empty `field`. Hinted retries are left
    out: their prompt holds part of the solution already."""
    prompts: list[list[int]] = []
    solutions: list[list[int]] = []
    seen: set[str] = set()
    markers: set[str] | None = None
    for grp in groups:
        prompt = grp.prompt
        if prompt.hint is not None or prompt.id in seen or any(passes(grp.results)):
            continue
        solution = prompt.row.fields.get(field)
        if solution is None or not str(solution).strip():
            continue
        markers = protected_markers(tokenizer, "") if markers is None else markers
        ids = text_ids(tokenizer, str(solution), markers)
        if tokenizer.eos_token_id is not None:
            ids = [*ids, tokenizer.eos_token_id]
        seen.add(prompt.id)
        prompts.append(list(prompt.token_ids))
        solutions.append(ids)
    return prompts, solutions


def guidance_batch(
    groups: Sequence[_Scored], algorithm: AlgorithmSpec, tokenizer, passes: Callable[[list[RubricResult]], list[bool]],
    *, pad_id: int, device: torch.device,
) -> tuple[TokenBatch | None, dict[str, float]]:  # fmt: skip
    """Off-policy guidance (`algorithm.guidance_coef`): the reference solutions of this process's failed groups
    this step, one row per prompt, as a batch (None when off or when no group failed), and
    `guidance/prompt_frac`, the share of the step's unhinted groups that got one."""
    if algorithm.guidance_coef == 0:
        return None, {}
    prompts, solutions = guidance_rows(groups, tokenizer, algorithm.guidance_field, passes)
    unhinted = sum(grp.prompt.hint is None for grp in groups)
    metrics = {"guidance/prompt_frac": len(prompts) / max(1, unhinted)}
    if not prompts:
        return None, metrics
    return TokenBatch.build(prompts, solutions, pad_id=pad_id, device=device), metrics
