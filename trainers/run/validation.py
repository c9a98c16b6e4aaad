"""Validation during training: k samples of each held-out prompt every N steps, scored by the
run's rubric and reported as `val/` metrics and validation rollouts at the step they follow.

    val/reward/mean, val/reward/std      over every validation sample
    val/reward/<criterion>/mean          each criterion's mean score
    val/pass@1, val/pass@2, ... val/pass@k   unbiased pass@j per prompt, averaged over prompts
    timing/validation_s                  seconds the validation took

A sample passes when the rubric says so (reward >= rubric.pass_threshold); a rubric without a
threshold counts a sample as passing at reward >= 1.0 (`DEFAULT_PASS_REWARD`: full marks on the
usual 0..1 scale), so pass@k means "solved" either way.

The held-out prompts are a separate dataset (`validation.path`) or a fraction of the training rows
chosen by `holdout_seed` and taken out of training (`split_prompts`). Validation samples on its own
random stream, seeded by (run seed, step), and puts every generator back afterwards
(`checkpoint.random_state_kept`): a run with validation on trains exactly as one with it off, and
the validation at a step samples the same completions whether or not the run was resumed.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from trainers.curriculum.stats import rollout_passed
from trainers.data.prompts import Prompt, load_prompts
from trainers.data.readers import DataError
from trainers.report import Reporter, Rollout
from trainers.rewards.rubric import Rubric
from trainers.rollout.engines.base import RolloutEngine, SamplingParams
from trainers.rollout.generate import ScoredGroup, generate_and_score
from trainers.rollout.progress import GenerationProgress, counted
from trainers.run.checkpoint import random_state_kept
from trainers.run.evaluate import episode_totals, sampled_metrics
from trainers.run.records import episode_rollout
from trainers.spec import RunSpec

PREFIX = "val"
SPLIT = "validation"  # Rollout.split of validation rollouts
DEFAULT_PASS_REWARD = 1.0
# Mixed into the seeds below so the holdout and validation streams differ from every other stream a seed drives.
_HOLDOUT_STREAM = 0x484F4C44
_SAMPLING_STREAM = 0x56414C


def held_out_rows(num_rows: int, fraction: float, seed: int) -> list[int]:
    """Indexes of the rows held out of `num_rows`, ascending: round(fraction x rows) of them (at least
    one), the same for the same (rows, fraction, seed). Raises DataError when none would be left to train on."""
    count = max(1, round(num_rows * fraction))
    if count >= num_rows:
        raise DataError(
            f"validation.holdout_fraction {fraction:g} of the {num_rows} training rows holds out {count}, leaving "
            "none to train on: lower it, or give a separate validation dataset (validation.path)"
        )
    order = np.random.default_rng([seed, _HOLDOUT_STREAM]).permutation(num_rows)
    return sorted(int(i) for i in order[:count])


def split_prompts(spec: RunSpec, tokenizer, prompts: list[Prompt]) -> tuple[list[Prompt], list[Prompt]]:
    """(prompts to train on, prompts to validate on) from the training prompts. Without validation
    every prompt trains; with a held-out dataset every training prompt still trains; with a
    holdout fraction the held-out rows are removed from training. Validation prompts keep file order."""
    v = spec.validation
    if v is None:
        return prompts, []
    if v.path:
        return prompts, load_prompts(v.data_spec(spec.data), tokenizer)
    held = set(held_out_rows(len(prompts), v.holdout_fraction, v.holdout_seed))
    train = [p for i, p in enumerate(prompts) if i not in held]
    return train, [p for i, p in enumerate(prompts) if i in held][: v.num_prompts]


def sampling_seed(run_seed: int, step: int) -> int:
    """The seed validation samples with after `step`: fixed by (run seed, step), so a resumed run
    validates with the same draws as one that never stopped."""
    return int(np.random.SeedSequence([run_seed, step, _SAMPLING_STREAM]).generate_state(1)[0])


class Validator:
    """Runs validation when it is due: after every `every_n_steps` steps, at the last step, and
    before the first one with `at_start`. The schedule reads the step count only, so a resumed run
    goes on with it."""

    def __init__(self, spec: RunSpec, prompts: list[Prompt]) -> None:
        if spec.validation is None:
            raise ValueError("Validator needs spec.validation")
        if not prompts:
            raise DataError("validation: the held-out dataset has no prompts")
        self.spec = spec
        self.settings = spec.validation
        self.prompts = prompts
        self.progress: GenerationProgress | None = None  # how far its sampling is, in the log (single-turn)

    def due(self, step: int) -> bool:
        if step == 0:
            return self.settings.at_start
        return step % self.settings.every_n_steps == 0 or step == self.spec.optim.total_steps

    @property
    def sampling(self) -> SamplingParams:
        params = SamplingParams.from_spec(self.spec)
        temperature = self.settings.temperature
        return params if temperature is None else replace(params, temperature=temperature)

    def run(self, step: int, engine: RolloutEngine, rubric: Rubric, tokenizer, reporter: Reporter) -> dict[str, float]:
        """Sample, score and report validation after `step` (metrics, then the rollouts); returns the metrics."""
        started = time.perf_counter()
        k = self.settings.samples_per_prompt
        what = "the step-0 validation" if step == 0 else f"validation after step {step}"
        with (
            random_state_kept(engine, sampling_seed(self.spec.optim.seed, step)),
            counted(self.progress if self.spec.environment is None else None, what, len(self.prompts) * k),
        ):
            groups = generate_and_score(
                engine, rubric, self.prompts, k, self.sampling, tokenizer=tokenizer, environment=self.spec.environment
            )
        totals = [episode_totals(g) for g in groups]
        passed = [self._passed(g, t) for g, t in zip(groups, totals, strict=True)]
        criteria = {name: [r.scores[name].score for g in groups for r in g.results] for name in rubric.names}
        metrics = sampled_metrics(PREFIX, totals, criteria, k, passed)
        metrics["timing/validation_s"] = time.perf_counter() - started
        reporter.metrics(step, metrics)
        reporter.log(
            f"validation after step {step}: reward {metrics[f'{PREFIX}/reward/mean']:.3f}, "
            f"pass@1 {metrics[f'{PREFIX}/pass@1']:.3f} ({len(groups)} prompts x {k})"
        )
        reporter.rollouts(step, self.rollouts(step, groups, totals))  # last: it closes the batch (the worker flushes)
        return metrics

    def _passed(self, group: ScoredGroup, totals: list[float]) -> list[bool]:
        """Which samples pass: the rubric's verdict when it has a threshold, else reward >= DEFAULT_PASS_REWARD."""
        return [
            rollout_passed(total, r.passed, DEFAULT_PASS_REWARD) for r, total in zip(group.results, totals, strict=True)
        ]

    def rollouts(self, step: int, groups: list[ScoredGroup], totals: list[list[float]]) -> list[Rollout]:
        multi_turn = self.spec.environment is not None
        return [
            episode_rollout(
                ep,
                result,
                step=step,
                prompt_id=group.prompt.id,
                sample_index=j,
                reward=group_totals[j],
                prompt=ep.messages if multi_turn else group.prompt.row.prompt,
                trained=False,
                multi_turn=multi_turn,
                split=SPLIT,
            )  # fmt: skip
            for group, group_totals in zip(groups, totals, strict=True)
            for j, (ep, result) in enumerate(zip(group.episodes, group.results, strict=True))
        ]
