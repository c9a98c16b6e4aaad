"""Hints for prompts the model cannot yet solve (GHPO, arXiv:2507.10628; "Staying in the Sweet
Spot" hint scaffolding).

A group whose samples all fail teaches GRPO nothing: every advantage is 0. Such a prompt is
retried, in the same step, with the start of its reference solution written as the start of the
assistant's answer; the model continues from there, and the rubric scores hint + continuation as
the answer. The hinted group replaces the failed one in training, with its advantage baseline
computed within itself.

The hint is a prefix of the answer, not advice added to the prompt: a small model cannot follow
"here is a hint", but it can continue a solution already begun, and its tokens are then exactly
the solution's first tokens (the cut is made on the tokenised solution, never mid-token). Those
tokens are appended to the prompt's ids, so they sit before the completion and are never trained
on: the loss covers completion tokens only.

Per prompt, a hint level (the fraction of the solution's tokens given) is kept across steps:

    first failure                       -> start_fraction
    a hinted group passes (any sample)  -> level * shrink, not below min_fraction
    a hinted group fails too            -> level / shrink, not above max_fraction (the next retry,
                                           this step or a later one, gives a longer hint)
    the prompt passes without a hint    -> the level is dropped (the next failure starts over)

A sample passes as the per-prompt statistics say (`stats.rollout_passed`: the rubric's
pass_threshold when it has one, else a reward of at least `curriculum.pass_reward`), so "never
solved" means the same here as in the prompts view. Plain Python apart from the tokenizer it is
handed; the levels go into the checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from trainers.curriculum.stats import rollout_passed
from trainers.data.prompts import Hint, Prompt, protected_markers, text_ids
from trainers.rewards.sample import RubricResult


class _Scored(Protocol):
    prompt: Prompt
    results: list[RubricResult]


G = TypeVar("G", bound=_Scored)


@dataclass
class HintSchedule:
    """Each prompt's hint level (see the module docstring); prompts without one use `start`."""

    start: float
    minimum: float
    maximum: float
    shrink: float
    levels: dict[str, float] = field(default_factory=dict)

    def level(self, prompt_id: str) -> float:
        return self.levels.get(prompt_id, self.start)

    def observe_unhinted(self, prompt_id: str, passed: bool) -> None:
        """The prompt's unhinted group: passing drops its level; failing keeps it for the retry."""
        if passed:
            self.levels.pop(prompt_id, None)

    def observe_hinted(self, prompt_id: str, fraction: float, passed: bool) -> float:
        """A hinted group at `fraction`: shorten the hint if it passed, lengthen it if not.
        Returns the new level."""
        new = max(self.minimum, fraction * self.shrink) if passed else min(self.maximum, fraction / self.shrink)
        self.levels[prompt_id] = new
        return new

    def state_dict(self) -> dict[str, Any]:
        return {"levels": dict(self.levels)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.levels = dict(state["levels"])


def hint_token_count(solution_tokens: int, fraction: float) -> int:
    """Tokens of a solution of `solution_tokens` given at `fraction`: ceil(fraction * n), at least
    1 and at most n - 1 (the model must write something); 0 when the solution is too short."""
    if solution_tokens < 2:
        return 0
    return min(solution_tokens - 1, max(1, math.ceil(fraction * solution_tokens - 1e-9)))


def hinted_prompt(prompt: Prompt, tokenizer, hint_field: str, fraction: float) -> Prompt | None:
    """`prompt` with the first `fraction` of its row's `hint_field` solution opening the answer:
    its token ids are the prompt's followed by the hint's. None when the row has no solution
    long enough to cut."""
    solution = prompt.row.fields.get(hint_field)
    if solution is None or not str(solution).strip():
        return None
    # A dataset's solution is text: it never becomes the template's special tokens.
    ids = text_ids(tokenizer, str(solution), protected_markers(tokenizer, ""))
    n = hint_token_count(len(ids), fraction)
    if n == 0:
        return None
    hint_ids = ids[:n]
    text = tokenizer.decode(hint_ids)
    return replace(
        prompt, text=prompt.text + text, token_ids=[*prompt.token_ids, *hint_ids], hint=Hint(text, fraction, n)
    )


@dataclass
class HintTally:
    """What one step's hints did, for the `hints/` metrics."""

    groups_hinted: int = 0  # failed groups that got at least one hinted retry
    samples: int = 0  # hinted samples generated
    passed: int = 0  # of which passed
    fractions: list[float] = field(default_factory=list)  # one per hinted group generated

    def metrics(self) -> dict[str, float]:
        """`hints/groups_hinted` always; `hints/hinted_pass_rate` (share of hinted samples that
        passed) and `hints/mean_fraction` (mean hint fraction over hinted groups) when any was hinted."""
        out = {"hints/groups_hinted": float(self.groups_hinted)}
        if self.fractions:
            out["hints/hinted_pass_rate"] = self.passed / self.samples
            out["hints/mean_fraction"] = sum(self.fractions) / len(self.fractions)
        return out


class Hinter:
    """Runs the hinted retries of a round of groups and keeps the schedule between steps."""

    def __init__(
        self, schedule: HintSchedule, tokenizer, hint_field: str, max_retries: int, pass_reward: float
    ) -> None:
        self.schedule = schedule
        self.tokenizer = tokenizer
        self.hint_field = hint_field
        self.max_retries = max_retries
        self.pass_reward = pass_reward
        self.tally = HintTally()

    @classmethod
    def from_spec(cls, spec, tokenizer) -> Hinter:
        """From the run's `curriculum` section (`hints` on)."""
        schedule = HintSchedule(
            spec.hint_start_fraction, spec.hint_min_fraction, spec.hint_max_fraction, spec.hint_shrink
        )
        return cls(schedule, tokenizer, spec.hint_field, spec.hint_max_retries, spec.pass_reward)

    def retry(
        self, groups: Sequence[G], generate: Callable[[list[Prompt], list[int]], list[G]]
    ) -> tuple[list[G], list[G]]:
        """(`groups` with each all-failed one replaced by its last hinted retry, every hinted group
        generated). All the failed groups of a retry go to `generate(prompts, group sizes)` in one
        call, each retry as large as the group it replaces. Retries of a group stop at its first
        passing one or after `max_retries`."""
        out = list(groups)
        for grp in groups:
            self.schedule.observe_unhinted(grp.prompt.id, self.passed(grp))
        pending = [k for k, grp in enumerate(groups) if not self.passed(grp)]
        hinted_groups: list[G] = []
        hinted_ever: set[int] = set()
        for _ in range(self.max_retries):
            retries = {
                k: p
                for k in pending
                if (p := hinted_prompt(groups[k].prompt, self.tokenizer, self.hint_field,
                                       self.schedule.level(groups[k].prompt.id))) is not None
            }  # fmt: skip
            if not retries:
                break
            new = generate(list(retries.values()), [len(groups[k].results) for k in retries])
            pending = []
            for k, grp in zip(retries, new, strict=True):
                passed = self.passed(grp)
                self.schedule.observe_hinted(grp.prompt.id, grp.prompt.hint.fraction, passed)
                self._count(grp)
                hinted_ever.add(k)
                out[k] = grp
                hinted_groups.append(grp)
                if not passed:
                    pending.append(k)
        self.tally.groups_hinted += len(hinted_ever)
        return out, hinted_groups

    def passes(self, grp: _Scored) -> list[bool]:
        return [rollout_passed(r.reward, r.passed, self.pass_reward) for r in grp.results]

    def passed(self, grp: _Scored) -> bool:
        """Any of the group's samples passed."""
        return any(self.passes(grp))

    def _count(self, grp: _Scored) -> None:
        self.tally.samples += len(grp.results)
        self.tally.passed += sum(self.passes(grp))
        self.tally.fractions.append(grp.prompt.hint.fraction)

    def step_metrics(self) -> dict[str, float]:
        """This step's `hints/` metrics; starts the next step's count."""
        out, self.tally = self.tally.metrics(), HintTally()
        return out
