"""Turn-aware advantage estimators: credit for each turn of a multi-turn episode, not one
number broadcast over the whole trajectory.

Both take the one `ADVANTAGES` signature (`trainers.algorithms.advantages` registers them) and
read the turn boundaries from `turns` (a `TurnLayout`); without one, every sequence is a single
turn and both reduce to GRPO. The loop has already put each turn's environment reward on the
last sampled token of that turn, so the episode's sequence score is outcome + turn rewards
(+ the KL-in-reward penalty when that is on); the *outcome part* below is the score minus the
turn rewards, i.e. the rubric's reward (with that penalty).

Normalisation everywhere is GRPO's: (x - mean) / (std + eps) over a set, std unbiased, and a
set of one gives 0 (no baseline can be formed from one value). Observation tokens (turn_index
-1, mask 0) and padding get 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainers.algorithms.groups import group_normalise
from trainers.algorithms.masked import zero_masked
from trainers.algorithms.returns import discounted_returns, sequence_scores
from trainers.algorithms.turns import TurnLayout


def _outcome_part(token_rewards: Tensor, mask: Tensor, turns: TurnLayout) -> Tensor:
    """(B,) the sequence score without the turn rewards the loop placed in it."""
    return sequence_scores(token_rewards, mask) - (turns.turn_rewards * turns.turn_valid).sum(-1)


def _per_token(turn_values: Tensor, mask: Tensor, turns: TurnLayout) -> Tensor:
    """(B, K) per-turn values -> (B, T): each sampled token gets its turn's value, 0 elsewhere."""
    index = turns.turn_index.clamp(min=0)  # (B, T); -1 (observations, padding) is masked below
    values = turn_values.gather(1, index)  # (B, T)
    return zero_masked(values, mask.bool() & (turns.turn_index >= 0))


@torch.no_grad()
def mt_grpo_advantages(
    token_rewards: Tensor,
    mask: Tensor,
    group_index: Tensor,
    *,
    eps: float,
    gamma: float,
    turns: TurnLayout | None = None,
) -> tuple[Tensor, Tensor]:
    """Turn-level credit (MT-GRPO, "Reinforcing Multi-Turn Reasoning in LLM Agents via Turn-Level
    Credit Assignment", arXiv:2505.11821, section 4):

        A^O_i    = normalise_g(o_i)                       o_i the outcome part of episode i
        A^T_ik   = normalise_{g,k}(r_ik)                  among the group's episodes that have turn k
        A_t      = A^O_i + w * sum_{k' >= k, k' < K_i} A^T_ik'    for a token t of turn k of episode i

    w is `turns.turn_advantage_weight` (`algorithm.turn_advantage_weight`). A turn is credited for
    the turn rewards of itself and of the turns after it, as a return (gamma = 1) sums what
    follows; the outcome is shared by every turn.

    The paper's two-turn case (a tool turn with reward R^T, then an answer turn scored by the
    outcome R^O only) gives turn 0 tokens A^T + A^O and turn 1 tokens A^O: its equations with
    lambda = 1 (the paper puts lambda on A^O of the first turn; here the weight is on the turn part,
    the same up to the scale of the whole advantage). With zero turn rewards every A^T is 0 and
    this is GRPO on the outcome. `gamma` only shapes the returned reward-to-go.
    """
    turns = turns if turns is not None else TurnLayout.single_turn(mask)
    B, K = turns.turn_rewards.shape
    outcome_adv = group_normalise(_outcome_part(token_rewards, mask, turns), group_index, eps)  # (B,)

    valid = turns.turn_valid  # (B, K)
    rows, cols = valid.nonzero(as_tuple=True)  # one entry per (episode, turn) that exists
    keys = torch.stack([group_index[rows], cols], dim=-1)  # (N, 2): (group, turn)
    turn_adv = torch.zeros((B, K), device=mask.device)
    turn_adv[rows, cols] = group_normalise(turns.turn_rewards[rows, cols].float(), keys, eps)
    to_go = turn_adv.flip(-1).cumsum(-1).flip(-1)  # (B, K): sum over k' >= k (absent turns hold 0)

    per_turn = outcome_adv.unsqueeze(-1) + turns.turn_advantage_weight * to_go  # (B, K)
    return _per_token(per_turn, mask, turns), discounted_returns(token_rewards, mask, gamma)


def _step_returns(turn_rewards: Tensor, valid: Tensor, outcome: Tensor, gamma: float) -> Tensor:
    """(B, K) R_ik = sum_{k' >= k} gamma^(k'-k) r_ik' + gamma^(K_i-1-k) * o_i over existing turns:
    the outcome arrives with the episode's last turn."""
    B, K = turn_rewards.shape
    last = valid.sum(-1) - 1  # (B,)
    at_last = torch.arange(K, device=valid.device) == last.unsqueeze(-1)  # (B, K)
    rewards = torch.where(valid, turn_rewards + at_last * outcome.unsqueeze(-1), torch.zeros_like(turn_rewards))
    returns = torch.zeros_like(rewards)
    running = torch.zeros(B, device=rewards.device)
    for k in reversed(range(K)):
        running = rewards[:, k] + gamma * running
        returns[:, k] = running
    return torch.where(valid, returns, torch.zeros_like(returns))


@torch.no_grad()
def gigpo_advantages(
    token_rewards: Tensor,
    mask: Tensor,
    group_index: Tensor,
    *,
    eps: float,
    gamma: float,
    turns: TurnLayout | None = None,
) -> tuple[Tensor, Tensor]:
    """Group-in-group credit (GiGPO, arXiv:2505.10978, section 4):

        A^E_i    = normalise_g(score_i)                   score_i = outcome part + turn rewards
        R_ik     = sum_{k' >= k} gamma^(k'-k) r_ik' + gamma^(K_i-1-k) o_i     the step return
        A^S_ik   = normalise_{g,s}(R_ik)                  over every (episode, turn) of group g whose
                                                          anchor state turns.states[i][k] equals s
        A_t      = A^E_i + omega * A^S_ik                 for a token t of turn k of episode i

    omega is `turns.step_advantage_weight` (`algorithm.step_advantage_weight`). A state seen once
    in a group forms a step group of one and gets A^S = 0, as does the unknown state "" (it names no
    state, so equal strings would be a false match). With no repeated states this is GRPO.
    """
    turns = turns if turns is not None else TurnLayout.single_turn(mask)
    B, K = turns.turn_rewards.shape
    episode_adv = group_normalise(sequence_scores(token_rewards, mask), group_index, eps)  # (B,)

    returns = _step_returns(
        turns.turn_rewards.float(), turns.turn_valid, _outcome_part(token_rewards, mask, turns), gamma
    )
    step_adv = torch.zeros((B, K), device=mask.device)
    slots: list[tuple[int, int]] = []
    keys: list[int] = []
    state_ids: dict[tuple[int, str], int] = {}
    groups = group_index.tolist()
    for i in range(B):
        states = turns.states[i] if i < len(turns.states) else []
        for k in range(int(turns.turn_valid[i].sum())):
            state = states[k] if k < len(states) else ""
            if state:
                slots.append((i, k))
                keys.append(state_ids.setdefault((groups[i], state), len(state_ids)))
    if slots:
        rows = torch.tensor([i for i, _ in slots], device=mask.device)
        cols = torch.tensor([k for _, k in slots], device=mask.device)
        step_adv[rows, cols] = group_normalise(returns[rows, cols], torch.tensor(keys, device=mask.device), eps)

    per_turn = episode_adv.unsqueeze(-1) + turns.step_advantage_weight * step_adv  # (B, K)
    return _per_token(per_turn, mask, turns), discounted_returns(token_rewards, mask, gamma)
