"""Warnings for a run that cannot learn, in words and early, each with what to change.

A GRPO-family step learns only from differences between the samples of a group. A run can go on for
hours without one: every group scoring alike (the task out of reach, or already solved), a criterion
that scores the same everywhere (a format the model never produces), tool calls cut into malformed
JSON by the turn's token limit. The loss is then zero or noise and the curves say little; these are
the reasons the trainer can see in its own groups. Each warns once, after `STEPS` steps in a row (a
cut call at its first sizeable step), on the run page through the reporter. Prompts cut to
`data.max_prompt_tokens` are warned about at the start (`trainers.data.prompts.cut_prompts_warning`);
a tools environment whose model calls no tool, by `trainers.run.tool_silence`."""

from __future__ import annotations

from trainers.report import Reporter
from trainers.rollout.environments.tool_calls import malformed
from trainers.spec import RunSpec
from trainers.update.groups import Group

STEPS = 3  # steps in a row before a warning
CUT_CALL_SHARE = 0.25  # the share of episodes with a cut tool call that warns


class LearningWatch:
    """Looks at each step's first-round groups (this process's) for the reasons it cannot learn."""

    def __init__(self, spec: RunSpec) -> None:
        self.max_new_tokens = spec.rollout.max_new_tokens
        self.group_size = spec.algorithm.group_size
        self.no_spread = 0  # steps in a row in which no group's rewards differed
        self.constant: dict[str, tuple[int, float]] = {}  # criterion -> (steps in a row, the one score)
        self.warned: set[str] = set()

    def observe(self, step: int, groups: list[Group], reporter: Reporter) -> None:
        if not groups:
            return
        self._watch_spread(step, groups, reporter)
        self._watch_criteria(step, groups, reporter)
        self._watch_cut_calls(step, groups, reporter)

    def _warn(self, key: str, step: int, message: str, reporter: Reporter) -> None:
        if key not in self.warned:
            self.warned.add(key)
            reporter.warning(step, message)

    def _watch_spread(self, step: int, groups: list[Group], reporter: Reporter) -> None:
        self.no_spread = 0 if any(grp.has_spread for grp in groups) else self.no_spread + 1
        if self.no_spread < STEPS:
            return
        rewards = {round(r, 6) for grp in groups for r in grp.totals}
        alike = f" (every one {rewards.pop():g})" if len(rewards) == 1 else ""
        self._warn("spread", step, (
            f"in {STEPS} steps no group's rewards differed{alike}: a step learns only from differences between "
            f"the samples of a prompt, so none could teach anything. Make the task reachable (easier prompts, or "
            f"a curriculum), give partial credit (a criterion that scores steps toward the answer), or sample "
            f"more per prompt (algorithm.group_size, {self.group_size} now)"
        ), reporter)  # fmt: skip

    def _watch_criteria(self, step: int, groups: list[Group], reporter: Reporter) -> None:
        results = [r for grp in groups for r in grp.results]
        names = sorted({name for r in results for name in r.scores})
        if len(names) < 2:  # one criterion is the reward: the spread warning says it
            return
        for name in names:
            scores = [r.scores[name] for r in results if name in r.scores]
            values = {round(s.score, 6) for s in scores}
            if any(s.error is not None for s in scores) or len(values) != 1:  # failures: FailureWatch's
                self.constant.pop(name, None)
                continue
            value = values.pop()
            streak, before = self.constant.get(name, (0, value))
            self.constant[name] = (streak + 1 if before == value else 1, value)
            if self.constant[name][0] >= STEPS:
                self._warn(f"constant:{name}", step, (
                    f"criterion {name!r} scored {value:g} on every rollout in {STEPS} steps: it tells no sample "
                    f"from another, so it teaches nothing. If it checks a format or an answer form the model never "
                    f"produces, say that form in the system prompt (with an example), or give it partial credit"
                ), reporter)  # fmt: skip

    def _watch_cut_calls(self, step: int, groups: list[Group], reporter: Reporter) -> None:
        episodes = [ep for grp in groups for ep in grp.episodes]
        cut = sum(
            any(t.finish_reason == "length" and any(malformed(c) for c in t.tool_calls) for t in ep.turns)
            for ep in episodes
        )
        if cut and cut / len(episodes) >= CUT_CALL_SHARE:
            self._warn("cut_calls", step, (
                f"{cut} of {len(episodes)} episodes at step {step} wrote a tool call that the turn's token limit "
                f"(rollout.max_new_tokens, {self.max_new_tokens}) cut into malformed JSON: the tool never ran. "
                f"Raise rollout.max_new_tokens so a whole call fits"
            ), reporter)  # fmt: skip
