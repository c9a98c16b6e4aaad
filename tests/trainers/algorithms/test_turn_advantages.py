"""Turn-aware advantage estimators (mt_grpo, gigpo) against numbers computed by hand.

2 groups x 3 episodes of 2-3 turns with unequal turn lengths. In a layout, "k" is a sampled
token of turn k and "o" an observation token (turn_index -1, mask 0); T = 7 columns.

    ep  group  layout          turn rewards  outcome  score  states (before each turn)
    0   5      0 0 o 1         1 0           1        2      start A
    1   5      0 o o 1 1 o 2   0 1 1         0        2      start B A
    2   5      0 0 0 o 1 1     1 1           1        3      start A
    3   9      0 o 1 o 2 2     0 0 1         0        1      start A ""
    4   9      0 0 o o 1 1 1   1 0           1        2      start C
    5   9      0 o 1           0 0           0        0      start A

As the loop lays them out, token_rewards hold each turn's reward on its last sampled token
and the outcome on the episode's last sampled token; observation and padding positions hold
PAD, which no result may see. Every normalisation divides by (std + EPS), std unbiased.
"""

import math

import pytest
import torch

from trainers.algorithms.advantages import ADVANTAGES
from trainers.algorithms.turns import TurnLayout

PAD = 100.0
EPS = 1e-6
T = 7
LAYOUTS = ["00o1", "0oo11o2", "000o11", "0o1o22", "00oo111", "0o1"]
GROUPS = torch.tensor([5, 5, 5, 9, 9, 9])
TURN_REWARDS = [[1, 0], [0, 1, 1], [1, 1], [0, 0, 1], [1, 0], [0, 0]]
OUTCOMES = [1, 0, 1, 0, 1, 0]
STATES = [["start", "A"], ["start", "B", "A"], ["start", "A"], ["start", "A", ""], ["start", "C"], ["start", "A"]]

S3 = 1 / math.sqrt(3)  # the unbiased std of any three values {x, x, x + 1} or {x, x + 1, x + 1}
Q = (1 / 3) / (S3 + EPS)  # such a set normalises to -2Q, Q, Q or -Q, -Q, 2Q


def _turn_index(layout: str) -> list[int]:
    return [-1 if c == "o" else int(c) for c in layout]


def _batch(layouts=LAYOUTS, turn_rewards=TURN_REWARDS, outcomes=OUTCOMES):
    """(token_rewards, mask, turn_index lists) as the loop builds them."""
    mask = torch.zeros(len(layouts), T)
    rewards = torch.full((len(layouts), T), PAD)
    index = [_turn_index(layout) for layout in layouts]
    for i, idx in enumerate(index):
        sampled = [t for t, k in enumerate(idx) if k >= 0]
        mask[i, sampled] = 1
        rewards[i, sampled] = 0
        for k, r in enumerate(turn_rewards[i]):
            rewards[i, max(t for t in sampled if idx[t] == k)] += r
        rewards[i, sampled[-1]] += outcomes[i]
    return rewards, mask, index


def _layout(turn_weight: float = 1.0, step_weight: float = 1.0, states=STATES) -> TurnLayout:
    _, _, index = _batch()
    return TurnLayout.build(index, TURN_REWARDS, OUTCOMES, states, columns=T,
                            turn_advantage_weight=turn_weight, step_advantage_weight=step_weight)  # fmt: skip


def _per_token(per_turn: list[list[float]]) -> torch.Tensor:
    """(B, T) with per_turn[i][k] on the sampled tokens of turn k of episode i, 0 elsewhere."""
    out = torch.zeros(len(LAYOUTS), T)
    for i, layout in enumerate(LAYOUTS):
        for t, k in enumerate(_turn_index(layout)):
            if k >= 0:
                out[i, t] = per_turn[i][k]
    return out


def _estimate(name: str, turns: TurnLayout | None, gamma: float = 1.0) -> torch.Tensor:
    rewards, mask, _ = _batch()
    advantages, _ = ADVANTAGES.get(name)(rewards, mask, GROUPS, eps=EPS, gamma=gamma, turns=turns)
    return advantages


def test_the_batch_places_turn_rewards_and_outcomes_as_the_table_says():
    rewards, mask, _ = _batch()
    scores = (rewards * mask).sum(-1)
    assert scores.tolist() == [2, 2, 3, 1, 2, 0]
    assert rewards[1].tolist() == [0, PAD, PAD, 0, 1, PAD, 1]  # turn 1 ends at column 4, turn 2 at 6


def test_mt_grpo_adds_the_normalised_turn_rewards_of_this_turn_and_the_later_ones_to_the_outcome():
    # Outcome advantage A^O, within each group:
    #   group 5 outcomes 1 0 1 -> Q -2Q Q;  group 9 outcomes 0 1 0 -> -Q 2Q -Q
    # Turn advantages A^T_k, among the group's episodes that have turn k:
    #   group 5 turn 0: 1 0 1 -> Q -2Q Q;  turn 1: 0 1 1 -> -2Q Q Q;  turn 2: only ep 1 -> 0
    #   group 9 turn 0: 0 1 0 -> -Q 2Q -Q;  turn 1: 0 0 0 -> 0 0 0;  turn 2: only ep 3 -> 0
    # Sums over k' >= k (in units of Q):
    #   ep0 [1-2, -2] = [-1, -2]   ep1 [-2+1+0, 1, 0] = [-1, 1, 0]   ep2 [1+1, 1] = [2, 1]
    #   ep3 [-1, 0, 0]             ep4 [2, 0]                       ep5 [-1, 0]
    # Token advantage = A^O + to-go:
    expected = [
        [1 - 1, 1 - 2],
        [-2 - 1, -2 + 1, -2 + 0],
        [1 + 2, 1 + 1],
        [-1 - 1, -1 + 0, -1 + 0],
        [2 + 2, 2],
        [-2, -1],
    ]
    advantages = _estimate("mt_grpo", _layout())
    torch.testing.assert_close(advantages, _per_token([[v * Q for v in row] for row in expected]))


def test_mt_grpo_weighs_the_turn_part_by_the_turn_advantage_weight():
    # A^O + 0.5 * to-go, with the to-go sums of the test above
    to_go = [[-1, -2], [-1, 1, 0], [2, 1], [-1, 0, 0], [2, 0], [-1, 0]]
    outcome = [1, -2, 1, -1, 2, -1]
    expected = [[(o + 0.5 * g) * Q for g in row] for o, row in zip(outcome, to_go, strict=True)]
    torch.testing.assert_close(_estimate("mt_grpo", _layout(turn_weight=0.5)), _per_token(expected))


def test_gigpo_adds_step_advantages_of_turns_taken_from_the_same_state():
    # Episode advantage A^E on scores: group 5: 2 2 3 -> -Q -Q 2Q
    #   group 9: 1 2 0, mean 1, unbiased std 1 -> 0, 1 / (1 + EPS), -1 / (1 + EPS)
    # Step returns with gamma = 0.5, the outcome arriving with the last turn:
    #   ep0 [1, 0+1]   -> R1 = 1,   R0 = 1 + 0.5 * 1 = 1.5
    #   ep1 [0, 1, 1]  -> R2 = 1,   R1 = 1 + 0.5 = 1.5,   R0 = 0 + 0.5 * 1.5 = 0.75
    #   ep2 [1, 1+1]   -> R1 = 2,   R0 = 1 + 0.5 * 2 = 2
    #   ep3 [0, 0, 1]  -> R2 = 1,   R1 = 0.5,   R0 = 0.25
    #   ep4 [1, 0+1]   -> R1 = 1,   R0 = 1.5
    #   ep5 [0, 0]     -> R1 = 0,   R0 = 0
    # State groups (a group's states only; "A" of group 9 is not "A" of group 5):
    #   5/start: 1.5 0.75 2, mean 17/12, deviations 1/12 -8/12 7/12, var (1 + 64 + 49) / 144 / 2 = 19/48
    #   5/A: ep0 R1 = 1, ep1 R2 = 1, ep2 R1 = 2 -> -Q -Q 2Q        5/B: ep1 alone -> 0
    #   9/start: 0.25 1.5 0, mean 7/12, deviations -4/12 11/12 -7/12, var (16 + 121 + 49) / 144 / 2 = 31/48
    #   9/A: ep3 R1 = 0.5, ep5 R1 = 0, mean 0.25, var 2 * 0.25^2 / 1 = 1/8   9/C: ep4 alone -> 0
    #   ep3's third turn has the unknown state "" -> 0
    s5, s9, sa = math.sqrt(19 / 48) + EPS, math.sqrt(31 / 48) + EPS, math.sqrt(1 / 8) + EPS
    one = 1 / (1 + EPS)
    episode = [-Q, -Q, 2 * Q, 0.0, one, -one]
    step = [
        [(1 / 12) / s5, -Q],
        [(-8 / 12) / s5, 0.0, -Q],
        [(7 / 12) / s5, 2 * Q],
        [(-4 / 12) / s9, 0.25 / sa, 0.0],
        [(11 / 12) / s9, 0.0],
        [(-7 / 12) / s9, -0.25 / sa],
    ]
    expected = [[e + s for s in row] for e, row in zip(episode, step, strict=True)]
    torch.testing.assert_close(_estimate("gigpo", _layout(), gamma=0.5), _per_token(expected))

    half = [[e + 0.5 * s for s in row] for e, row in zip(episode, step, strict=True)]
    torch.testing.assert_close(_estimate("gigpo", _layout(step_weight=0.5), gamma=0.5), _per_token(half))


def test_gigpo_without_known_states_is_grpo():
    unknown = [[""] * len(r) for r in TURN_REWARDS]
    torch.testing.assert_close(_estimate("gigpo", _layout(states=unknown)), _estimate("grpo", None))


SINGLE_REWARDS = torch.tensor([[0.5, 0, 0.5], [0, 2, PAD], [3, PAD, PAD], [0, 0, 0], [0, 0, PAD], [0, 0, 3]])
SINGLE_MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 1, 1]], dtype=torch.float32)
SINGLE_GROUPS = torch.tensor([7, 7, 7, 3, 3, 3])


def _single_turn(name: str, state: str | None) -> torch.Tensor:
    """Advantages of one-turn episodes without turn rewards: no layout (None) or one whose states are `state`."""
    layout = None
    if state is not None:
        index = [[0] * int(n) for n in SINGLE_MASK.sum(-1).tolist()]
        layout = TurnLayout.build(index, [[0.0]] * 6, [1, 2, 3, 0, 0, 3], [[state]] * 6, columns=3)
    advantages, _ = ADVANTAGES.get(name)(SINGLE_REWARDS, SINGLE_MASK, SINGLE_GROUPS, eps=EPS, gamma=1.0, turns=layout)
    return advantages


@pytest.mark.parametrize(("name", "state"), [("mt_grpo", None), ("mt_grpo", "s"), ("gigpo", None), ("gigpo", "")])
def test_single_turn_episodes_without_turn_rewards_get_grpos_advantages(name, state):
    torch.testing.assert_close(_single_turn(name, state), _single_turn("grpo", None))


def test_gigpo_counts_a_shared_first_state_twice_on_single_turn_episodes():
    # Every episode of a group starts from state "s": the step group is the whole group and the step
    # return is the outcome, so the step advantage equals the episode advantage: A = (1 + omega) * A_grpo.
    torch.testing.assert_close(_single_turn("gigpo", "s"), 2 * _single_turn("grpo", None))


@pytest.mark.parametrize("name", ["mt_grpo", "gigpo"])
def test_observation_tokens_get_zero_and_their_values_change_nothing(name):
    rewards, mask, index = _batch()
    advantages, returns = ADVANTAGES.get(name)(rewards, mask, GROUPS, eps=EPS, gamma=0.5, turns=_layout())
    observation = torch.tensor([[k == -1 for k in idx] + [False] * (T - len(idx)) for idx in index])
    assert observation.sum() == 10
    assert advantages[observation].abs().max().item() == 0.0
    noisy = torch.where(mask.bool(), rewards, torch.randn(rewards.shape, generator=torch.Generator().manual_seed(1)))
    noisy_advantages, noisy_returns = ADVANTAGES.get(name)(noisy, mask, GROUPS, eps=EPS, gamma=0.5, turns=_layout())
    torch.testing.assert_close(noisy_advantages, advantages, rtol=0, atol=0)
    torch.testing.assert_close(noisy_returns, returns, rtol=0, atol=0)
