"""Procedural rows as a run uses them: a fixed pool per difficulty level (the training prompts)
and a held-out set drawn from a separate seed stream, never sharing a prompt with the pool.

Every row depends only on (task, seed, level, index), so a resumed run, an evaluation and a
benchmark all see the same prompts.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path

from trainers.data.procedural.generators import GENERATORS
from trainers.data.rows import PromptRow
from trainers.spec import ProceduralSpec

# Draws per wanted held-out row before giving up: at level 1 a task may have few distinct
# problems, most of them already in the training pool.
_HELD_OUT_TRIES = 50


def _rng(task: str, stream: str, seed: int, level: int, index: int) -> random.Random:
    return random.Random(f"{task}|{stream}|{seed}|{level}|{index}")


def pool_rows(task: str, seed: int, level: int, n: int) -> list[PromptRow]:
    """The training pool of one level: `n` rows with ids 'L<level>-<i>'."""
    generate = GENERATORS.get(task).generate
    rows = []
    for i in range(n):
        problem = generate(_rng(task, "train", seed, level, i), level)
        rows.append(PromptRow(id=f"L{level}-{i}", row=i + 1, prompt=problem.prompt, fields=dict(problem.fields)))
    return rows


def held_out_rows(spec: ProceduralSpec) -> list[PromptRow]:
    """`spec.held_out_per_level` rows at each level from min to max difficulty (ids
    'held-out-L<level>-<i>'), none with a prompt of that level's training pool. A level whose
    problems are nearly all in the pool yields fewer rows."""
    generate = GENERATORS.get(spec.task).generate
    rows: list[PromptRow] = []
    for level in spec.levels:
        seen = {row.prompt for row in pool_rows(spec.task, spec.seed, level, spec.pool_size)}
        found = 0
        for i in range(spec.held_out_per_level * _HELD_OUT_TRIES):
            if found == spec.held_out_per_level:
                break
            problem = generate(_rng(spec.task, "held-out", spec.seed, level, i), level)
            if problem.prompt in seen:
                continue
            seen.add(problem.prompt)
            rows.append(PromptRow(id=f"held-out-L{level}-{found}", row=len(rows) + 1, prompt=problem.prompt,
                                  fields=dict(problem.fields)))  # fmt: skip
            found += 1
    return rows


def write_jsonl(rows: Iterable[PromptRow], path: str | Path) -> Path:
    """Rows as a JSONL dataset (`id`, `prompt` and the fields), readable with data.path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": r.id, "prompt": r.prompt, **r.fields}) + "\n" for r in rows))
    return path
