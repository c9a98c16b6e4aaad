"""Step 4 of the algorithm: the trained groups' episodes as one padded batch (`StepBatch`): prompt,
then every sampled and observation token; the masks (sampled tokens only), outcome and turn rewards,
the turn layout and the sampler's logprobs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainers.algorithms.filters import overlong_loss_mask
from trainers.algorithms.turns import TurnLayout, credit_modes
from trainers.episodes import Episode
from trainers.spec.algorithm import AlgorithmSpec
from trainers.update.batches import TokenBatch
from trainers.update.groups import Group


@dataclass
class StepBatch:
    """The sequences a step trains on, as tensors: (B, T) over completion tokens, B = every
    sample of every trained group."""

    tokens: TokenBatch  # its completion mask covers sampled and observation tokens (all attended to)
    trained: torch.Tensor  # (B, T) 1 on sampled tokens only: observation tokens are never trained on
    loss_mask: torch.Tensor  # `trained`, less truncated episodes under the overlong filter and failed ones
    group_index: torch.Tensor  # (B,) which group each sequence belongs to
    rewards: torch.Tensor  # (B,) shaped outcome rewards
    turn_rewards: torch.Tensor  # (B, T) each turn's environment reward on that turn's last sampled token
    turns: TurnLayout
    engine_logp: torch.Tensor | None  # (B, T) the sampler's logprobs, when it reported them

    @property
    def mask(self) -> torch.Tensor:
        return self.trained


def turn_reward_row(episode: Episode) -> list[float]:
    """Over the episode's completion tokens: each turn's environment reward on that turn's last
    sampled token, 0 elsewhere (a turn that sampled nothing has nowhere to hold its reward)."""
    row: list[float] = []
    for turn in episode.turns:
        sampled = [0.0] * len(turn.token_ids)
        if sampled:
            sampled[-1] = turn.reward
        row += sampled + [0.0] * len(turn.observation_ids)
    return row


def per_token(rows: list[list[float]], columns: int, device: torch.device) -> torch.Tensor:
    """(B, columns) float from per-episode lists over completion tokens (0 past each one's end)."""
    out = torch.zeros((len(rows), columns))
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out.to(device)


def engine_logprobs(episodes: list[Episode], columns: int, device: torch.device) -> torch.Tensor | None:
    """(B, T) the engine's logprobs of the sampled tokens (0 on observations), when it reported them."""
    rows = [ep.engine_logprobs for ep in episodes]
    if any(row is None for row in rows):
        return None
    return per_token(rows, columns, device)


def build_step_batch(groups: list[Group], algorithm: AlgorithmSpec, *, pad_id: int, device: torch.device) -> StepBatch:
    """The groups' episodes as one padded batch. An episode whose environment failed, and under the
    overlong filter one cut at a length limit, stays in the batch (its tokens are attended to) but
    out of the loss."""
    samples = [(grp, j) for grp in groups for j in range(len(grp.episodes))]
    episodes = [grp.episodes[j] for grp, j in samples]
    tokens = TokenBatch.build(
        [ep.prompt_ids for ep in episodes], [ep.completion_ids for ep in episodes], pad_id=pad_id, device=device
    )
    T = tokens.completion_mask.shape[1]
    trained = per_token([ep.trained_mask for ep in episodes], T, device)  # (B, T)
    # An episode whose environment failed says nothing about the model: it does not train.
    excluded = torch.tensor([ep.end_reason == "error" for ep in episodes], device=device)  # (B,)
    if algorithm.overlong_filter:
        excluded |= torch.tensor([ep.end_reason in ("length", "token_budget") for ep in episodes], device=device)
    outcomes = [grp.rewards[j] for grp, j in samples]
    return StepBatch(
        tokens=tokens,
        trained=trained,
        loss_mask=overlong_loss_mask(excluded, trained),
        group_index=torch.tensor([k for k, grp in enumerate(groups) for _ in grp.episodes], device=device),
        rewards=torch.tensor(outcomes, device=device),
        turn_rewards=per_token([turn_reward_row(ep) for ep in episodes], T, device),
        turns=TurnLayout.build(
            [ep.turn_index for ep in episodes],
            [[t.reward for t in ep.turns] for ep in episodes],
            outcomes,
            [[t.state for t in ep.turns] for ep in episodes],
            columns=T,
            device=device,
            turn_advantage_weight=algorithm.turn_advantage_weight,
            step_advantage_weight=algorithm.step_advantage_weight,
            tool_turns=[[bool(t.tool_calls) for t in ep.turns] for ep in episodes],
            modes=credit_modes(algorithm),
        ),
        engine_logp=engine_logprobs(episodes, T, device),
    )
