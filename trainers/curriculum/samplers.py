"""Prompt samplers: which prompts a step draws. One registry, one signature:

    sampler(pool: SamplerPool, n: int) -> list[Prompt]      # n prompts, in the order they are used

`pool.source` is the data order (`PromptSource`: every prompt once per epoch, seeded); `pool.book`
each prompt's statistics; `pool.rng` the curriculum's own numpy Generator (seeded by optim.seed,
saved in checkpoints), the only randomness a sampler may use, so that its choices are reproducible
and a resumed run draws what an uninterrupted one would. Names and descriptions: `catalog.SAMPLERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from trainers.curriculum.stats import PromptBook
from trainers.data.prompts import Prompt
from trainers.data.source import PromptSource
from trainers.registry import Registry
from trainers.spec import CurriculumSpec


@dataclass
class SamplerPool:
    """What a sampler draws from and reads."""

    source: PromptSource
    book: PromptBook
    rng: np.random.Generator
    spec: CurriculumSpec


Sampler = Callable[[SamplerPool, int], list[Prompt]]
PROMPT_SAMPLERS: Registry[Sampler] = Registry("prompt sampler")


@PROMPT_SAMPLERS.register("uniform")
def uniform(pool: SamplerPool, n: int) -> list[Prompt]:
    """The next n prompts in data order: exactly what runs drew before samplers existed."""
    return pool.source.next_batch(n)


@PROMPT_SAMPLERS.register("online_difficulty")
def online_difficulty(pool: SamplerPool, n: int) -> list[Prompt]:
    """Thompson sampling toward a target pass rate (MoPPS; VADE): draw a pass rate from every
    prompt's Beta posterior and take the prompts whose draw is nearest `target_pass_rate`, where
    a group is most likely to hold both a pass and a fail. Each of the n slots is first given, with
    probability `exploration_floor`, to the next prompt in data order instead: every prompt keeps
    being drawn, so an estimate that went wrong is corrected."""
    explore = int(pool.rng.binomial(n, pool.spec.exploration_floor))
    chosen = pool.source.next_batch(explore) if explore else []
    prompts = pool.source.prompts
    stats = [pool.book[p.id] for p in prompts]
    theta = pool.rng.beta([s.alpha for s in stats], [s.beta for s in stats])  # one posterior draw per prompt
    nearest = [prompts[i] for i in np.argsort(np.abs(theta - pool.spec.target_pass_rate), kind="stable")]
    taken = {p.id for p in chosen}
    chosen += [p for p in nearest if p.id not in taken][: n - explore]
    while len(chosen) < n:  # fewer prompts than the batch: the nearest again (each draw is its own group)
        chosen += nearest[: n - len(chosen)]
    return chosen


@PROMPT_SAMPLERS.register("skip_solved")
def skip_solved(pool: SamplerPool, n: int) -> list[Prompt]:
    """Data order, passing over prompts whose last `skip_after` groups all passed (or, with
    `skip_failed`, all failed): they teach nothing at the moment. A passed-over prompt is drawn
    anyway with probability `recheck_rate`, so one the model forgets (or learns) is seen again.
    When every prompt is settled, after passing over as many as the data holds it takes what comes."""
    spec, chosen, passed_over = pool.spec, [], 0
    while len(chosen) < n:
        (prompt,) = pool.source.next_batch(1)
        stats = pool.book[prompt.id]
        settled = stats.pass_streak >= spec.skip_after or (spec.skip_failed and stats.fail_streak >= spec.skip_after)
        if settled and passed_over < len(pool.source.prompts) and pool.rng.random() >= spec.recheck_rate:
            passed_over += 1
            continue
        chosen.append(prompt)
    return chosen
