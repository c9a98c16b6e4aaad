"""Per-prompt statistics of a run: how often each training prompt was drawn, how its groups did,
and a Beta posterior of its pass rate (as MoPPS, "Can Prompt Difficulty be Online Predicted
for Accelerating RL Finetuning of Reasoning Models?", and VADE do).

A rollout *passes* when the rubric says so (`RubricResult.passed`, from rubric.pass_threshold)
or, without a threshold, when its reward reaches `curriculum.pass_reward` (`rollout_passed`).
Each group of a prompt updates its posterior Beta(alpha, beta):

    alpha <- decay * alpha + (1 - decay) * prior_alpha + passes
    beta  <- decay * beta  + (1 - decay) * prior_beta  + fails

`decay` = 1 keeps every past rollout; below 1 old evidence fades back to the prior, so the
estimate follows a policy that improves. Plain Python (no numpy, no torch): the loop, samplers,
budgets, checkpoints and the studio all read the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["unseen", "solved", "learnable", "never_solved"]
STATUSES: tuple[Status, ...] = ("unseen", "solved", "learnable", "never_solved")


def rollout_passed(reward: float, passed: bool | None, pass_reward: float) -> bool:
    """Whether one rollout passes: the rubric's verdict when it has a pass threshold, else reward >= pass_reward."""
    return passed if passed is not None else reward >= pass_reward


@dataclass
class PromptStats:
    """One training prompt's record. `history` holds (step, passed, samples) per group drawn."""

    prompt_id: str
    alpha: float
    beta: float
    draws: int = 0  # groups drawn (a prompt drawn twice in one step counts twice)
    passes: int = 0  # rollouts that passed, over the whole run
    samples: int = 0  # rollouts, over the whole run
    last_step: int | None = None
    pass_streak: int = 0  # groups in a row (the latest ones) where every rollout passed
    fail_streak: int = 0  # groups in a row (the latest ones) where every rollout failed
    history: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def pass_rate(self) -> float:
        """Posterior mean of the pass rate: alpha / (alpha + beta)."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def pass_rate_std(self) -> float:
        """Posterior standard deviation: sqrt(alpha * beta / ((alpha + beta)^2 (alpha + beta + 1)))."""
        total = self.alpha + self.beta
        return math.sqrt(self.alpha * self.beta / (total * total * (total + 1)))

    @property
    def status(self) -> Status:
        """unseen: never drawn. never_solved: drawn, and no rollout of it has ever passed.
        solved: every rollout of its latest group passed. learnable: the rest: some rollout has
        passed at some point, and its latest group held a failure (the model can, not yet reliably)."""
        if self.draws == 0:
            return "unseen"
        if self.passes == 0:
            return "never_solved"
        if self.pass_streak > 0:
            return "solved"
        return "learnable"

    def update(self, step: int, passed: int, samples: int, prior: tuple[float, float], decay: float) -> None:
        """Add one group of `samples` rollouts of which `passed` passed, drawn at `step`."""
        prior_alpha, prior_beta = prior
        self.alpha = decay * self.alpha + (1 - decay) * prior_alpha + passed
        self.beta = decay * self.beta + (1 - decay) * prior_beta + (samples - passed)
        self.draws += 1
        self.passes += passed
        self.samples += samples
        self.last_step = step
        self.pass_streak = self.pass_streak + 1 if passed == samples else 0
        self.fail_streak = self.fail_streak + 1 if passed == 0 else 0
        self.history.append((step, passed, samples))

    def event(self) -> dict[str, Any]:
        """What `Reporter.prompt_stats` carries for this prompt after its latest step: step_passed and
        step_samples add up its groups of that step (a small dataset can draw a prompt twice in one)."""
        latest = [(passed, samples) for step, passed, samples in self.history if step == self.last_step]
        passed, samples = sum(p for p, _ in latest), sum(n for _, n in latest)
        return {
            "prompt_id": self.prompt_id,
            "draws": self.draws,
            "alpha": self.alpha,
            "beta": self.beta,
            "pass_rate": self.pass_rate,
            "pass_rate_std": self.pass_rate_std,
            "last_step": self.last_step,
            "status": self.status,
            "step_passed": passed,
            "step_samples": samples,
        }


class PromptBook:
    """Every training prompt's `PromptStats` for one run, by prompt id (the dataset row id)."""

    def __init__(
        self, prompt_ids: list[str], *, prior_alpha: float = 1.0, prior_beta: float = 1.0, decay: float = 1.0
    ) -> None:
        if not 0 < decay <= 1:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.prior = (prior_alpha, prior_beta)
        self.decay = decay
        self.stats: dict[str, PromptStats] = {pid: self._fresh(pid) for pid in prompt_ids}

    def _fresh(self, prompt_id: str) -> PromptStats:
        return PromptStats(prompt_id, alpha=self.prior[0], beta=self.prior[1])

    def __getitem__(self, prompt_id: str) -> PromptStats:
        """The prompt's record; the prior for a prompt never observed nor listed (a procedural
        run's pool of a level it has just reached)."""
        return self.stats.get(prompt_id) or self._fresh(prompt_id)

    def __len__(self) -> int:
        return len(self.stats)

    def observe(self, step: int, prompt_id: str, passes: list[bool]) -> PromptStats:
        """One group of `prompt_id` drawn at `step`, with each rollout's pass verdict."""
        if prompt_id not in self.stats:  # a prompt the book was not told about still gets its record
            self.stats[prompt_id] = self._fresh(prompt_id)
        stats = self.stats[prompt_id]
        stats.update(step, sum(passes), len(passes), self.prior, self.decay)
        return stats

    def status(self, prompt_id: str) -> Status:
        """See `PromptStats.status` for the definitions."""
        return self.stats[prompt_id].status

    def fractions(self) -> dict[str, float]:
        """`prompts/<status>_frac` for each status, over every training prompt (they sum to 1)."""
        counts = dict.fromkeys(STATUSES, 0)
        for stats in self.stats.values():
            counts[stats.status] += 1
        total = max(len(self.stats), 1)
        return {f"prompts/{status}_frac": counts[status] / total for status in STATUSES}

    def state_dict(self) -> dict[str, Any]:
        """Plain data (lists, numbers, strings): goes into a checkpoint as is."""
        return {"stats": [asdict(s) for s in self.stats.values()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The records `state_dict` wrote; the prior and decay stay the run spec's."""
        loaded = {}
        for row in state["stats"]:
            row = {**row, "history": [tuple(h) for h in row["history"]]}
            loaded[row["prompt_id"]] = PromptStats(**row)
        self.stats = loaded
