"""Rollout budgets: how many rollouts each of a step's prompts gets. One registry, one signature:

    budget(prompts: list[Prompt], book: PromptBook, spec: RunSpec) -> Allocation

Each prompt's rollouts form its own group (its advantage baseline is computed within it, whatever
its size). Names and descriptions: `catalog.BUDGETS`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from trainers.curriculum.stats import PromptBook
from trainers.data.prompts import Prompt
from trainers.registry import Registry
from trainers.spec import RunSpec


@dataclass(frozen=True)
class Allocation:
    """Group size per prompt (in the prompts' order) and, when set, the most sequences one engine call
    may generate (large groups are then generated in pieces)."""

    sizes: list[int]
    chunk: int | None = None


Budget = Callable[[list[Prompt], PromptBook, RunSpec], Allocation]
ROLLOUT_BUDGETS: Registry[Budget] = Registry("rollout budget")


@ROLLOUT_BUDGETS.register("fixed")
def fixed(prompts: list[Prompt], book: PromptBook, spec: RunSpec) -> Allocation:
    """algorithm.group_size for every prompt: what runs did before budgets existed."""
    return Allocation([spec.algorithm.group_size] * len(prompts))


def moment(alpha: float, beta: float, n: int) -> float:
    """E[p^n] for p ~ Beta(alpha, beta): prod_{k<n} (alpha + k) / (alpha + beta + k)."""
    out = 1.0
    for k in range(n):
        out *= (alpha + k) / (alpha + beta + k)
    return out


def signal_probability(alpha: float, beta: float, n: int) -> float:
    """P(a group of n holds a pass and a fail) under the posterior: 1 - E[p^n] - E[(1-p)^n].
    Only such a group has a non-zero GRPO advantage; 0 for n <= 1."""
    return 1.0 - moment(alpha, beta, n) - moment(beta, alpha, n)


@ROLLOUT_BUDGETS.register("knapsack")
def knapsack(prompts: list[Prompt], book: PromptBook, spec: RunSpec) -> Allocation:
    """Knapsack RL ("Knapsack RL: Unlocking Exploration of LLMs via Optimizing Budget Allocation") with the value of a group being `signal_probability`: every
    prompt starts at min_group_size, then each remaining rollout goes to the prompt whose value
    it raises most (ties: the earlier prompt), none past max_group_size.

    For a fixed p the gain of one more rollout, p^n (1-p) + (1-p)^n p, shrinks as n grows, and an
    expectation over the posterior keeps that: each value is concave in n, and for a sum of concave
    values under one total, this greedy allocation is optimal. Prompts near p = 0.5 saturate within
    a few rollouts, so a larger budget flows to the hard (and the easy) ones, as Depth-Breadth
    Synergy argues. The step's total is spec.knapsack_rollouts, shared in
    proportion when a round (or a process) draws fewer than prompts_per_step prompts."""
    c = spec.curriculum
    share = round(spec.knapsack_rollouts * len(prompts) / spec.optim.prompts_per_step)
    total = min(max(share, len(prompts) * c.min_group_size), len(prompts) * c.max_group_size)
    sizes = [c.min_group_size] * len(prompts)
    posteriors = [(book[p.id].alpha, book[p.id].beta) for p in prompts]

    def gain(i: int) -> float:
        a, b = posteriors[i]
        return signal_probability(a, b, sizes[i] + 1) - signal_probability(a, b, sizes[i])

    heap = [(-gain(i), i) for i in range(len(prompts)) if sizes[i] < c.max_group_size]
    heapq.heapify(heap)
    for _ in range(total - sum(sizes)):
        _, i = heapq.heappop(heap)
        sizes[i] += 1
        if sizes[i] < c.max_group_size:
            heapq.heappush(heap, (-gain(i), i))
    return Allocation(sizes)


@ROLLOUT_BUDGETS.register("brorl")
def brorl(prompts: list[Prompt], book: PromptBook, spec: RunSpec) -> Allocation:
    """BroRL ("Scaling Reinforcement Learning via Broadened Exploration"): many rollouts per prompt (max_group_size each), generated
    generation_chunk sequences per engine call so a large group never has to fit at once."""
    c = spec.curriculum
    return Allocation([c.max_group_size] * len(prompts), chunk=c.generation_chunk)
