"""A scored group as training uses it (`Group`), and the shaping that makes one from a scored group:
the soft overlong penalty added to the rewards (DAPO), and whether the group's outcomes differ (groups
whose rewards all agree carry no signal, and dynamic sampling drops them)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from trainers.algorithms.filters import groups_with_reward_spread, overlong_soft_penalty
from trainers.rollout.generate import ScoredGroup
from trainers.spec.algorithm import AlgorithmSpec


@dataclass
class Group(ScoredGroup):
    """A scored group as training uses it: shaped rewards, advantages, whether it carries a signal."""

    rewards: list[float]  # the outcome: rubric reward (+ soft overlong penalty); turn rewards not included
    advantages: list[float] = field(default_factory=list)  # sequence-level, set when trained on

    has_spread: bool = True  # the episodes' rewards are not all equal (else they carry no signal)

    @property
    def totals(self) -> list[float]:
        """Each episode's reward as reported: the outcome plus the environment's turn rewards."""
        return [r + sum(t.reward for t in ep.turns) for r, ep in zip(self.rewards, self.episodes, strict=True)]


def shape_groups(scored: list[ScoredGroup], algorithm: AlgorithmSpec, max_completion_tokens: int) -> list[Group]:
    """Scored groups as training uses them: the soft overlong penalty added to the rewards (against the
    longest completion, `max_completion_tokens`), and whether each group's outcomes differ."""
    episodes = [ep for s in scored for ep in s.episodes]
    outcomes = torch.tensor([r.reward for s in scored for r in s.results], dtype=torch.float32)  # (B,)
    rewards = outcomes
    if algorithm.overlong_penalty:
        lengths = torch.tensor([len(ep.completion_ids) for ep in episodes])  # (B,)
        rewards = rewards + overlong_soft_penalty(
            lengths, max_completion_tokens, algorithm.overlong_buffer, algorithm.overlong_penalty_factor
        )
    turn_sums = torch.tensor([sum(t.reward for t in ep.turns) for ep in episodes], dtype=torch.float32)  # (B,)
    sizes = torch.tensor([len(s.episodes) for s in scored], dtype=torch.long)  # (P,)
    group_index = torch.arange(len(scored)).repeat_interleave(sizes)  # (B,)
    starts = [0, *torch.cumsum(sizes, 0).tolist()]  # group k is samples starts[k]:starts[k + 1]
    # Dynamic sampling keeps groups whose outcomes (with turn rewards) differ (DAPO): a length
    # penalty alone telling the samples apart is no signal about the answers.
    spread = groups_with_reward_spread(outcomes + turn_sums, group_index)  # (B,)
    return [
        Group(
            s.prompt,
            s.episodes,
            s.results,
            rewards[starts[k] : starts[k + 1]].tolist(),
            has_spread=bool(spread[starts[k]]),
        )
        for k, s in enumerate(scored)
    ]
