"""Evaluation: k sampled completions (or episodes, with an environment) per prompt from the base
model or a checkpoint, scored by the rubric: mean reward, mean per criterion, and pass@k when the rubric has a
pass threshold. Rollouts are reported like training's (step 0), under a split of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainers.data.prompts import Prompt, load_prompts
from trainers.models.loading import default_device, load_policy
from trainers.report import Reporter, failure_reported
from trainers.rewards.rubric import Rubric
from trainers.rollout.engines.base import RolloutEngine, SamplingParams
from trainers.rollout.engines.catalog import create_engine
from trainers.rollout.environments.packages.prepare import prepared
from trainers.rollout.generate import ScoredGroup, generate_and_score
from trainers.run.records import episode_rollout
from trainers.run.seeding import seed_everything
from trainers.run.suite_stats import cell_scores, pass_at_k, pass_ks, reward_estimate
from trainers.spec import RunSpec

# Rollout.split of an evaluation's samples (studio.runs.models.EVAL_SPLIT): never trained on, and kept apart from
# training rollouts in the inspector and the rollout list.
SPLIT = "eval"


@dataclass
class EvalResult:
    status: str  # "succeeded" | "cancelled"
    num_prompts: int  # prompts evaluated
    samples_per_prompt: int
    metrics: dict[str, float] = field(default_factory=dict)  # eval/reward/mean, eval/pass@k, ...


def evaluate(spec: RunSpec, reporter: Reporter, should_stop: Callable[[], bool] = lambda: False) -> EvalResult:
    """Evaluate `spec.eval.checkpoint` (or `spec.model.path`) on the first `eval.num_prompts`
    prompts of the dataset, in file order. `should_stop()` is checked between batches."""
    reporter.status("running", f"evaluating {spec.eval.checkpoint or spec.model.path}")
    rubric = engine = None
    try:
        with failure_reported(reporter):
            spec = prepared(spec, reporter.log)  # a verifiers environment's tasks and criteria, as a run's start
            seed_everything(spec.optim.seed)
            model, tokenizer = load_policy(spec.model, default_device(), checkpoint=spec.eval.checkpoint)
            model.eval()
            prompts = load_prompts(spec.data, tokenizer)[: spec.eval.num_prompts]
            rubric = Rubric.from_spec(spec.rubric)
            engine = create_engine(spec, model=model, tokenizer=tokenizer)
            samples = sample_prompts(spec, engine, rubric, tokenizer, prompts, reporter, should_stop)
            rewards, k = samples.rewards, spec.eval.samples_per_prompt
            has_threshold = spec.rubric.pass_threshold is not None
            passed = samples.verdicts if has_threshold else None
            metrics = sampled_metrics("eval", rewards, samples.criteria, k, passed) | interval_metrics(
                "eval", rewards, passed, seed=spec.optim.seed
            )
            reporter.metrics(0, metrics)
            status = "cancelled" if samples.stopped else "succeeded"
            reporter.status(status, f"{len(rewards)} prompts x {k} samples")
            return EvalResult(status, len(rewards), k, metrics)
    finally:
        # A failed or cancelled evaluation gives its engine's memory back too (a vLLM engine
        # lives in the worker process, which goes on to the next run).
        if engine is not None:
            engine.close()
        if rubric is not None:
            rubric.close()


def interval_metrics(
    prefix: str, rewards: list[list[float]], passed: list[list[bool]] | None, *, seed: int, resamples: int = 1000,
    confidence: float = 0.95,
) -> dict[str, float]:  # fmt: skip
    """`<prefix>/reward_mean` and, when `passed` says which samples pass, `<prefix>/pass@1` and `pass@k`, each
    with its bootstrap interval over prompts (`_low`, `_high`; trainers.run.suite_stats): what a suite reports
    for each (model, task) pair, so an evaluation run is the one-pair case of a suite."""
    if not rewards:
        return {}
    if passed is None:
        return reward_estimate(rewards, resamples=resamples, confidence=confidence, seed=seed).metrics(prefix)
    scores = cell_scores(rewards, passed, resamples=resamples, confidence=confidence, seed=seed)
    return scores.metrics(prefix)


@dataclass
class Samples:
    """k scored samples of each prompt evaluated: rewards[i] and verdicts[i] (the rubric's pass verdict, None
    without a threshold) are prompt i's; criteria[name] holds every sample's score; stopped: cut short."""

    rewards: list[list[float]] = field(default_factory=list)
    verdicts: list[list[bool | None]] = field(default_factory=list)
    criteria: dict[str, list[float]] = field(default_factory=dict)
    stopped: bool = False


def sample_prompts(
    spec: RunSpec,
    engine: RolloutEngine,
    rubric: Rubric,
    tokenizer: Any,
    prompts: list[Prompt],
    reporter: Reporter,
    should_stop: Callable[[], bool] = lambda: False,
) -> Samples:
    """`spec.eval.samples_per_prompt` samples of each prompt (episodes in `spec.environment`), sampled as
    `spec.rollout` says, in engine calls of about `rollout.generation_batch_size` sequences, each batch's
    rollouts reported at step 0. `should_stop()` is checked between batches."""
    k = spec.eval.samples_per_prompt
    params = SamplingParams.from_spec(spec)
    chunk = max(1, spec.rollout.generation_batch_size // k)  # prompts per engine call
    out = Samples(criteria={name: [] for name in rubric.names})
    multi_turn = spec.environment is not None
    for start in range(0, len(prompts), chunk):
        if should_stop():
            out.stopped = True
            break
        batch = prompts[start : start + chunk]
        t0 = time.perf_counter()
        rollouts = []
        scored_groups = generate_and_score(
            engine, rubric, batch, k, params, tokenizer=tokenizer, environment=spec.environment
        )
        for scored in scored_groups:
            group = scored.results
            totals = episode_totals(scored)
            out.rewards.append(totals)
            out.verdicts.append([r.passed for r in group])
            for name in rubric.names:
                out.criteria[name].extend(r.scores[name].score for r in group)
            rollouts += [
                episode_rollout(
                    ep,
                    r,
                    step=0,
                    prompt_id=scored.prompt.id,
                    sample_index=j,
                    reward=reward,
                    prompt=ep.messages if multi_turn else scored.prompt.row.prompt,
                    trained=False,
                    multi_turn=multi_turn,
                    split=SPLIT,
                )  # fmt: skip
                for j, (ep, r, reward) in enumerate(zip(scored.episodes, group, totals, strict=True))
            ]
        reporter.log(f"evaluated {start + len(batch)}/{len(prompts)} prompts ({time.perf_counter() - t0:.2f}s)")
        reporter.rollouts(0, rollouts)  # last: it closes the batch for reporters that flush on it
    return out


def episode_totals(scored: ScoredGroup) -> list[float]:
    """Each episode's reward as reported: the rubric's, plus its environment's turn rewards."""
    return [r.reward + sum(t.reward for t in ep.turns) for r, ep in zip(scored.results, scored.episodes, strict=True)]


def sampled_metrics(
    prefix: str,
    rewards: list[list[float]],
    criteria: dict[str, list[float]],
    k: int,
    passed: list[list[bool]] | None = None,
) -> dict[str, float]:
    """Metrics of k samples per prompt, under `prefix` ("eval", "val"): `<prefix>/reward/mean|std` over
    every sample, `<prefix>/reward/<criterion>/mean`, and, when `passed` says which samples pass,
    `<prefix>/pass@j` for j in `pass_ks(k)`: the unbiased estimate per prompt, averaged over prompts.
    rewards[i] and passed[i] are prompt i's k samples; criteria[name] holds every sample's score."""
    if not rewards:
        return {}
    out = {f"{prefix}/reward/mean": float(np.mean(rewards)), f"{prefix}/reward/std": float(np.std(rewards))}
    out |= {f"{prefix}/reward/{name}/mean": float(np.mean(values)) for name, values in criteria.items()}
    if passed is not None:
        for j in pass_ks(k):
            out[f"{prefix}/pass@{j}"] = float(np.mean([pass_at_k(k, sum(p), j) for p in passed]))
    return out
