"""Sampling and scoring, shared by training and evaluation: n completions of each prompt from the
rollout engine, each scored by the rubric."""

from __future__ import annotations

import time
from dataclasses import dataclass

from trainers.data import Prompt
from trainers.engines.base import Generation, RolloutEngine, SamplingParams
from trainers.rewards.rubric import Rubric
from trainers.rewards.sample import RubricResult, Sample


@dataclass
class ScoredGroup:
    """The completions sampled for one prompt, with the rubric's result for each."""

    prompt: Prompt
    generations: list[Generation]
    results: list[RubricResult]


def generate_and_score(
    engine: RolloutEngine,
    rubric: Rubric,
    prompts: list[Prompt],
    n: int,
    params: SamplingParams,
    timings: dict[str, float] | None = None,
) -> list[ScoredGroup]:
    """`n` completions of each prompt, scored; adds the seconds spent to `timings["generate"]`
    and `timings["score"]` when given. The rubric sees the completion text only; the prompt and
    the row's fields are context for the criteria that want them."""
    t0 = time.perf_counter()
    outputs = engine.generate([p.token_ids for p in prompts], n, params)
    t1 = time.perf_counter()
    samples = [
        Sample(prompt=p.row.prompt, completion=g.text, fields=p.row.fields)
        for p, gens in zip(prompts, outputs, strict=True)
        for g in gens
    ]
    results = rubric.score(samples)
    if timings is not None:
        timings["generate"] = timings.get("generate", 0.0) + t1 - t0
        timings["score"] = timings.get("score", 0.0) + time.perf_counter() - t1
    return [
        ScoredGroup(p, gens, results[k * n : (k + 1) * n])
        for k, (p, gens) in enumerate(zip(prompts, outputs, strict=True))
    ]
