"""An episode as a run or an evaluation reports it: the `Rollout` record the `Reporter` receives."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainers.data.prompts import Hint
from trainers.episodes import Episode
from trainers.report import Rollout
from trainers.rewards.sample import RubricResult
from trainers.scale.distributed import DistInfo, gathered_lists

if TYPE_CHECKING:
    from trainers.update.groups import Group


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
        teacher_tokens=episode.teacher_tokens,
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


def step_rollouts(
    groups: list[Group], trained: set[int], *, step: int, multi_turn: bool, dist: DistInfo
) -> list[Rollout]:
    """This process's groups of step `step` as Rollouts (`trained`: the ids of the groups it trained on). Their
    group ids are numbered over the step's groups on every process (a row drawn on two processes is "id" on
    the first and "id@1" on the second), so the gathered step has no two groups of one name. Every process
    must call it."""
    ids = [grp.prompt.id for grp in groups]
    per_process = gathered_lists([ids], dist)
    before = sum(len(part) for part in per_process[: dist.rank])
    group_ids = step_group_ids([i for part in per_process for i in part])[before : before + len(ids)]
    return [
        episode_rollout(
            ep,
            res,
            step=step,
            prompt_id=group_id,
            sample_index=j,
            reward=grp.totals[j],
            prompt=ep.messages if multi_turn else grp.prompt.row.prompt,
            advantage=grp.advantages[j] if grp.advantages else 0.0,
            trained=id(grp) in trained,
            multi_turn=multi_turn,
            hint=grp.prompt.hint,
            trained_version=step - 1,  # rollouts are reported after the step's update
        )  # fmt: skip
        for grp, group_id in zip(groups, group_ids, strict=True)
        for j, (ep, res) in enumerate(zip(grp.episodes, grp.results, strict=True))
    ]
