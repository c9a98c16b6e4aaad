"""A run's curriculum: the prompt sampler and rollout budget the spec names, the book of per-prompt
statistics they read, and the numpy Generator they draw with; all of it saved in checkpoints."""

from __future__ import annotations

from typing import Any

import numpy as np

from trainers.curriculum.budgets import ROLLOUT_BUDGETS, Allocation
from trainers.curriculum.samplers import PROMPT_SAMPLERS, SamplerPool
from trainers.curriculum.stats import PromptBook, rollout_passed
from trainers.data.prompts import Prompt
from trainers.data.source import PromptSource
from trainers.rewards.sample import RubricResult
from trainers.spec import RunSpec


class Curriculum:
    """Chooses each round's prompts (`draw`) and their group sizes (`allocate`), and learns from
    the scored groups (`observe`). Every process of a run holds an identical one: the same seed,
    and every process's groups observed in the same order."""

    def __init__(self, spec: RunSpec, source: PromptSource) -> None:
        c = spec.curriculum
        self.spec = spec
        self.book = PromptBook(
            [p.id for p in source.prompts], prior_alpha=c.prior_alpha, prior_beta=c.prior_beta, decay=c.decay
        )
        # Its own stream, the same on every process: a sampler's choices move no other randomness.
        self.pool = SamplerPool(source, self.book, np.random.default_rng(spec.optim.seed), c)
        self.sampler = PROMPT_SAMPLERS.get(c.sampler)
        self.budget = ROLLOUT_BUDGETS.get(c.budget)
        self.observed: list[str] = []  # prompt ids observed since `take_events`, in order

    def draw(self, n: int) -> list[Prompt]:
        return self.sampler(self.pool, n)

    def allocate(self, prompts: list[Prompt]) -> Allocation:
        return self.budget(prompts, self.book, self.spec)

    def passes(self, results: list[RubricResult]) -> list[bool]:
        """Each rollout's pass verdict (`stats.rollout_passed`, on the rubric's reward)."""
        return [rollout_passed(r.reward, r.passed, self.spec.curriculum.pass_reward) for r in results]

    def observe(self, step: int, groups: list[tuple[str, list[bool]]]) -> None:
        """(prompt id, pass verdicts) of each group scored at `step`."""
        for prompt_id, passes in groups:
            self.book.observe(step, prompt_id, passes)
            self.observed.append(prompt_id)

    def take_events(self) -> list[dict[str, Any]]:
        """`Reporter.prompt_stats` dicts of the prompts observed since the last call, once each."""
        events = [self.book[pid].event() for pid in dict.fromkeys(self.observed)]
        self.observed = []
        return events

    def metrics(self) -> dict[str, float]:
        """`prompts/{unseen,solved,learnable,never_solved}_frac` over every training prompt."""
        return self.book.fractions()

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.pool.rng.bit_generator.state, "book": self.book.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pool.rng.bit_generator.state = state["rng"]
        self.book.load_state_dict(state["book"])
