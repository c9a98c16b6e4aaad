"""Groups of different sizes (rollout budgets give each prompt its own): every estimator that
baselines within the group gives each group the advantages it would get computed alone."""

import pytest
import torch

from trainers.algorithms.advantages import ADVANTAGES
from trainers.algorithms.turns import TurnLayout

T = 6
# Three groups of sizes 4, 1 and 3 (ids need not be contiguous), episodes of 1-3 turns; "o" is an
# observation token. Each row: (layout, turn rewards, outcome, states before each turn).
EPISODES = [
    ("00o1", [1.0, 0.0], 1.0, ["s", "A"]),
    ("0o11", [0.0, 1.0], 0.0, ["s", "B"]),
    ("000", [0.5], 1.0, ["s"]),
    ("0o1o22", [0.0, 0.0, 1.0], 0.0, ["s", "A", "C"]),
    ("01", [1.0, 1.0], 1.0, ["s", "A"]),  # the group of one: no baseline can be formed
    ("00o11", [1.0, 0.0], 0.0, ["s", "A"]),
    ("0o1", [0.0, 0.0], 1.0, ["s", "A"]),
    ("000o1", [0.0, 1.0], 1.0, ["s", "B"]),
]
GROUPS = [7, 7, 7, 7, 2, 4, 4, 4]
# Estimators whose every statistic is taken within the group. reinforce_pp, reinforce_pp_baseline and
# group_mean_batch_std normalise over the whole batch by design, so a group alone differs there.
WITHIN_GROUP = ["grpo", "dr_grpo", "rloo", "mt_grpo", "gigpo"]


def batch(rows: list[int]):
    """(token_rewards, mask, group_index, turns) of the episodes `rows`, as the loop lays them out."""
    episodes = [EPISODES[i] for i in rows]
    index = [[-1 if c == "o" else int(c) for c in layout] for layout, *_ in episodes]
    rewards, mask = torch.zeros(len(rows), T), torch.zeros(len(rows), T)
    for i, (idx, (_, turn_rewards, outcome, _)) in enumerate(zip(index, episodes, strict=True)):
        sampled = [t for t, k in enumerate(idx) if k >= 0]
        mask[i, sampled] = 1
        for k, r in enumerate(turn_rewards):
            rewards[i, max(t for t in sampled if idx[t] == k)] += r
        rewards[i, sampled[-1]] += outcome
    turns = TurnLayout.build(
        index, [e[1] for e in episodes], [e[2] for e in episodes], [e[3] for e in episodes], columns=T
    )
    return rewards, mask, torch.tensor([GROUPS[i] for i in rows]), turns


@pytest.mark.parametrize("name", WITHIN_GROUP)
def test_each_group_gets_the_advantages_it_would_get_alone(name):
    rewards, mask, groups, turns = batch(list(range(len(EPISODES))))
    together, _ = ADVANTAGES.get(name)(rewards, mask, groups, eps=1e-6, gamma=1.0, turns=turns)
    assert together.abs().sum() > 0  # the groups with a spread carry a signal
    for group in sorted(set(GROUPS)):
        rows = [i for i, g in enumerate(GROUPS) if g == group]
        alone, _ = ADVANTAGES.get(name)(*batch(rows)[:3], eps=1e-6, gamma=1.0, turns=batch(rows)[3])
        torch.testing.assert_close(together[rows], alone, msg=f"{name}, group {group}")
    assert torch.all(together[4] == 0)  # a group of one has no baseline: 0 everywhere
