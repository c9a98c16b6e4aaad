"""A step's metrics beside the update's own: rewards (per criterion, with failure rates), responses,
episodes, timing, throughput and the data position; `the_step_metrics` puts a step's together, for a run
(trainers.run.loop.Trainer.step) and for the parts of a step built alone in tests alike."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from trainers.episodes import Episode
from trainers.report import TOKENS_GENERATED, TOKENS_TRAINED
from trainers.rollout.environments.tool_calls import well_formed
from trainers.run.failure_watch import FAILURE_RATE
from trainers.update.groups import Group

if TYPE_CHECKING:  # types only: the parts a step's metrics read
    from trainers.curriculum.hints import Hinter
    from trainers.curriculum.state import Curriculum
    from trainers.data.source import PromptSource
    from trainers.rewards.rubric import Rubric
    from trainers.run.collection import Collected, GroupCollector
    from trainers.spec import RunSpec


def episode_metrics(episodes: list[Episode]) -> dict[str, float]:
    """`episode/*`: turns, tool calls (per tool), tool errors, well-formed calls, answers,
    observation tokens and episodes ended at a limit, each a mean over the episodes."""
    calls = [[c for t in ep.turns for c in t.tool_calls] for ep in episodes]
    flat = [c for episode_calls in calls for c in episode_calls]
    out = {
        "episode/turns_mean": float(np.mean([len(ep.turns) for ep in episodes])),
        "episode/tool_calls_mean": float(np.mean([len(c) for c in calls])),
        "episode/tool_error_rate": float(np.mean([c.error is not None for c in flat])) if flat else 0.0,
        # The share of episodes that called tools and whose every call could be read.
        "episode/well_formed_call_rate": float(np.mean([well_formed(c) for c in calls])),
        "episode/answered_frac": float(np.mean([any(t.answered for t in ep.turns) for ep in episodes])),
        "episode/observation_tokens_mean": float(np.mean([ep.observation_tokens for ep in episodes])),
        "episode/ended_at_limit_frac": float(
            np.mean([ep.end_reason in ("turn_limit", "token_budget") for ep in episodes])
        ),
        "episode/error_frac": float(np.mean([ep.end_reason == "error" for ep in episodes])),
    }
    for tool in sorted({c.name for c in flat if c.name}):
        out[f"episode/tool_calls/{tool}"] = float(np.mean([sum(c.name == tool for c in ep) for ep in calls]))
    return out


def reward_metrics(groups: list[Group], criteria: list[str]) -> dict[str, float]:
    """`reward/*` of the groups: mean and spread, groups without a spread, each criterion's mean score
    and failure rate."""
    rewards = [r for grp in groups for r in grp.totals]
    out = {
        "reward/mean": float(np.mean(rewards)),
        "reward/std": float(np.std(rewards)),
        "reward/frac_zero_std_groups": float(np.mean([not g.has_spread for g in groups])),
    }
    results = [r for g in groups for r in g.results]
    for name in criteria:
        out[f"reward/{name}/mean"] = float(np.mean([r.scores[name].score for r in results]))
        # Raised, timed out or not run: such a score is 0 whatever the completion (see FailureWatch).
        out[f"{FAILURE_RATE}{name}"] = float(np.mean([r.scores[name].error is not None for r in results]))
    return out


def step_metrics(
    first_round: list[Group], generated: list[Group], train_groups: list[Group], timings: dict[str, float],
    *, rounds: int, lr: float, epoch: float, multi_turn: bool, device: torch.device,
) -> dict[str, float]:  # fmt: skip
    """Responses, timing, throughput and data position (`epoch`, fractional) of the step just taken."""
    episodes = [ep for grp in first_round for ep in grp.episodes]
    num_tokens = sum(len(ep.completion_ids) for grp in generated for ep in grp.episodes)
    # Tokens the training passes run over (prompt + completion of every trained sequence).
    train_tokens = sum(len(ep.prompt_ids) + len(ep.completion_ids) for grp in train_groups for ep in grp.episodes)
    step_s, train_s = timings["step"], timings["train"]
    metrics = {
        # Sampled tokens: what the model wrote (observation tokens are counted under episode/).
        "response/length_mean": float(np.mean([ep.sampled_tokens for ep in episodes])),
        "response/length_max": float(max(ep.sampled_tokens for ep in episodes)),
        "response/truncated_frac": float(np.mean([ep.end_reason in ("length", "token_budget") for ep in episodes])),
        "actor/lr": lr,
        "timing/generate_s": timings["generate"],
        "timing/score_s": timings["score"],
        "timing/train_s": train_s,
        "timing/step_s": step_s,
        "perf/tokens_per_s": num_tokens / step_s,
        "perf/gen_tokens_per_s": num_tokens / max(timings["generate"], 1e-9),
        "perf/train_tokens_per_s": train_tokens / max(train_s, 1e-9),
        "data/epoch": epoch,
        "data/generation_rounds": float(rounds),
        "data/groups_kept": float(len(train_groups)),
        # This process's counts; the run reports their sum over processes (what the run's usage adds up).
        TOKENS_GENERATED: float(num_tokens),
        TOKENS_TRAINED: float(train_tokens),
    }
    if multi_turn:
        metrics |= episode_metrics(episodes) | {"timing/tool_s": timings.get("tool", 0.0)}
    if device.type == "cuda":
        metrics["perf/gpu_mem_peak_gb"] = torch.cuda.max_memory_allocated(device) / 2**30
    return metrics


class MetricParts(Protocol):
    """What a step's metrics read of the run's parts (a Trainer, or a step's parts built alone)."""

    spec: RunSpec
    step_count: int
    rubric: Rubric
    source: PromptSource
    curriculum: Curriculum
    hinter: Hinter | None
    collector: GroupCollector


def the_step_metrics(
    parts: MetricParts, found: Collected, train_groups: list[Group], update: dict[str, float], *, lr: float,
    started: float, train_started: float, guidance: dict[str, float], procedural: dict[str, float],
) -> dict[str, float]:  # fmt: skip
    """The metrics of the step just taken (`parts.step_count`: updates applied), as a run reports them: the
    update's (`update`), the pipeline's when asynchronous, the rewards of this process's first round of groups,
    responses, episodes, the timings since `started` (the whole step) and `train_started` (the update on),
    throughput, the data position, IGPO's gains, `guidance`'s, the curriculum's, the hints' and a procedural
    task's difficulty (`procedural`). Completes `found.timings` (the step's and the update's seconds)."""
    collector, timings = parts.collector, found.timings
    timings["step"] = time.perf_counter() - started
    timings["train"] = time.perf_counter() - train_started
    if parts.spec.rollout.asynchronous.runs_ahead:  # reads the step's seconds, sets generate/score to its window
        update = update | collector.async_metrics(found, train_groups, parts.step_count)
    first_round = found.generated[: collector.local_prompts]
    return (
        update
        | reward_metrics(first_round, parts.rubric.names)
        | step_metrics(
            first_round,
            found.generated,
            train_groups,
            timings,
            rounds=found.rounds,
            lr=lr,
            epoch=parts.source.epoch + parts.source.index / len(parts.source.prompts),
            multi_turn=parts.spec.environment is not None,
            device=collector.device,
        )
        | found.info_gain_metrics
        | guidance
        | parts.curriculum.metrics()
        | (parts.hinter.step_metrics() if parts.hinter is not None else {})
        | procedural
    )
