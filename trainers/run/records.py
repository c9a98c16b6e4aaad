"""An episode as a run or an evaluation reports it: the `Rollout` record the `Reporter` receives."""

from __future__ import annotations

from trainers.data.prompts import Hint
from trainers.episodes import Episode
from trainers.report import Rollout
from trainers.rewards.sample import RubricResult


def episode_rollout(
    episode: Episode, result: RubricResult, *, step: int, prompt_id: str, sample_index: int, reward: float,
    prompt: str | list[dict], advantage: float = 0.0, trained: bool = True, multi_turn: bool = False,
    hint: Hint | None = None,
    split: str = "train",
    trained_version: int | None = None,
) -> Rollout:  # fmt: skip
    """An episode as a run (or an evaluation) reports it: the last turn's text as the completion
    and, for multi-turn episodes, every turn with its tool calls, observation, reward and advantage.
    A hinted retry's completion is what the model wrote after the hint, which is reported apart.
    `trained_version`: the policy version the step trained from, which makes the rollout's staleness."""
    last = episode.turns[-1] if episode.turns else None
    oldest = episode.oldest_version
    return Rollout(
        step=step,
        prompt_id=prompt_id,
        sample_index=sample_index,
        prompt=prompt,
        completion=episode.final_text,
        reward=reward,
        scores=result.scores,
        advantage=advantage,
        num_tokens=episode.sampled_tokens,
        finish_reason=last.finish_reason if last is not None else "stop",
        logprobs=None if multi_turn else episode.engine_logprobs,
        trained=trained,
        turns=[t.to_dict() for t in episode.turns] if multi_turn else None,
        end_reason=episode.end_reason if multi_turn else None,
        error=episode.error,
        hint=hint.text if hint is not None else None,
        hint_fraction=hint.fraction if hint is not None else None,
        split=split,
        policy_versions=episode.version_spans(),
        staleness=trained_version - oldest if trained_version is not None and oldest is not None else None,
    )


def step_group_ids(prompt_ids: list[str]) -> list[str]:
    """One id per group of a step: the prompt's id, with "@k" added to its k-th repeat
    (a small dataset, or dynamic sampling, can draw a prompt twice in one step; each draw is
    its own group with its own advantage baseline, and the inspector shows groups by id)."""
    seen: dict[str, int] = {}
    out = []
    for pid in prompt_ids:
        seen[pid] = seen.get(pid, 0) + 1
        out.append(pid if seen[pid] == 1 else f"{pid}@{seen[pid]}")
    return out
