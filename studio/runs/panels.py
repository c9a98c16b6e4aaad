"""Which chart of the run page (and the compare page) shows which metric key.

The pages' JS draws the panels in this order and puts a key in the first panel whose pattern
it matches; a key no panel claims gets a panel of its own namespace ("custom/..." -> "custom").
Patterns are regular expressions that JS reads with `new RegExp(pattern).test(key)` and Python
with `re.search(pattern, key, re.ASCII)`: keep to what both read alike (anchors, groups,
alternation, character classes, `\\w`), so the two never place a key differently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Panel:
    id: str
    title: str
    pattern: str
    stacked: bool = False  # one run: the curves are drawn stacked (parts of a whole, e.g. time per step)

    def matches(self, key: str) -> bool:
        return re.search(self.pattern, key, re.ASCII) is not None


PANELS: tuple[Panel, ...] = (
    # Validation (trainers.run.validation) beside its training counterpart: the grid fills rows left to right.
    Panel("reward", "Reward", r"^reward/(mean|std)$"),
    Panel("val_reward", "Validation reward (held-out prompts)", r"^val/reward/(mean|std)$"),
    Panel("criteria", "Reward per criterion", r"^reward/[^/]+/mean$"),
    Panel("val_criteria", "Validation reward per criterion", r"^val/reward/[^/]+/mean$"),
    Panel("val_pass", "Validation pass@k", r"^val/pass@\d+$"),
    Panel("kl", "KL to reference", r"^actor/kl$"),
    Panel("entropy", "Entropy", r"^actor/entropy$"),
    # clip_frac_low|high and dual_clip_frac (tokens held at the dual-clip bound c) side by side.
    Panel("clip", "Clip fraction", r"^actor/(dual_)?clip_frac"),
    Panel("length", "Response length (tokens)", r"^response/length_(mean|max)$"),
    Panel("truncated", "Truncated fraction", r"^response/truncated_frac$"),
    Panel("advantage", "Advantage", r"^advantage/"),
    Panel("loss", "Policy loss", r"^actor/loss$"),
    Panel("grad_norm", "Grad norm", r"^actor/grad_norm$"),
    Panel("lr", "Learning rate", r"^actor/lr$"),
    # A separate sampler (vLLM): its logprobs against the trainer's on the same tokens, the
    # number that says whether the rollouts are still on-policy.
    Panel(
        "mismatch",
        "Sampler vs trainer logprobs",
        r"^rollout/(logprob_gap_(mean|max)|engine_trainer_kl|tis_clip_frac)$",
    ),
    # An off-policy correction (algorithm.correction, trainers.algorithms.mismatch): what its importance
    # weights came to, and the shares of tokens it truncated or dropped.
    Panel(
        "correction",
        "Off-policy correction: mean weight, truncated / rejected share",
        r"^correction/(weight_mean|truncated_frac|rejected_frac)$",
    ),
    Panel("tokens", "Tokens / s", r"^perf/(\w+_)?tokens_per_s$"),
    Panel("timing", "Time per step (s)", r"^timing/(generate|score|train)_s$", stacked=True),
    # Asynchronous rollouts (rollout.asynchronous, trainers.run.pipeline): only an asynchronous run reports
    # async/ keys, so only its page draws these. The histograms stack: the step's rollouts (tokens) by how
    # many policy versions behind the trained weights they were sampled, k = 0..max_staleness.
    Panel("staleness", "Staleness (policy versions behind)", r"^async/staleness_(mean|max)$"),
    Panel("staleness_hist", "Rollouts by staleness (versions behind)", r"^async/staleness_\d+$", stacked=True),
    Panel("tokens_lag", "Tokens by policy lag (versions behind)", r"^async/tokens_lag_\d+$", stacked=True),
    Panel("dropped_stale", "Groups dropped for staleness (step, run total)", r"^async/dropped_stale(_total)?$"),
    Panel("queue", "Queue depth (scored groups waiting)", r"^async/queue_depth$"),
    Panel("busy", "Engine and trainer busy fraction", r"^async/(engine|trainer)_busy$"),
    Panel("partial", "Partial rollouts (share sampled by several versions)", r"^async/partial_frac$"),
    # Multi-turn episodes (trainers/rollouts.py). Tool time is spent inside generation (tools run
    # between turns), so it is not a slice of the stacked step time: a panel of its own.
    Panel("turns", "Turns per episode", r"^episode/turns_mean$"),
    Panel("tool_calls", "Tool calls per episode", r"^episode/tool_calls(_mean|/[^/]+)$"),
    Panel(
        "tool_quality", "Tool calls: error and well-formed rates", r"^episode/(tool_error_rate|well_formed_call_rate)$"
    ),
    Panel("episode_ends", "Episodes answered / ended at a limit", r"^episode/(answered_frac|ended_at_limit_frac)$"),
    Panel("observation", "Observation tokens per episode (not trained on)", r"^episode/observation_tokens_mean$"),
    Panel("tool_time", "Tool time (s)", r"^timing/tool_s$"),
    # Per-prompt statistics (studio.runs.prompt_stats): the run's prompts by status, parts of a whole.
    Panel(
        "prompts",
        "Prompts: solved / learnable / never solved",
        r"^prompts/(solved|learnable|never_solved|unseen)_frac$",
        stacked=True,
    ),
    # Hinted retries (trainers.curriculum.hints): a count apart from the two shares.
    Panel("hints_groups", "Groups retried with a hint", r"^hints/groups_hinted$"),
    Panel("hints_rates", "Hinted retries: pass rate and hint fraction", r"^hints/(hinted_pass_rate|mean_fraction)$"),
    # Off-policy guidance (algorithm.guidance_coef, trainers.algorithms.guidance): the SFT term's share of the
    # loss beside the share of the step's prompts that got it, and the term itself (its own scale).
    Panel(
        "guidance_share",
        "Guidance: SFT share of the loss, prompts given a reference",
        r"^guidance/(loss_share|prompt_frac)$",
    ),
    Panel("guidance_loss", "Guidance: SFT loss on reference tokens", r"^guidance/sft_loss$"),
    # Step-level token selections (trainers.update.selection): forking tokens' share and entropy threshold,
    # and the share of tokens Clip-Cov / KL-Cov picked.
    Panel(
        "token_selection",
        "Tokens selected: forking share, Clip-Cov / KL-Cov share",
        r"^actor/(forking_frac|cov_selected_frac)$",
    ),
    Panel("forking_threshold", "Forking tokens: entropy threshold", r"^actor/forking_entropy_threshold$"),
    # An experiment's suite on its checkpoints (studio.evaluations.training), at each scored checkpoint's step:
    # the values, then their 95% bootstrap bounds apart, so the value curves stay readable.
    Panel("suite_pass", "Suite pass@1 / pass@k per task (checkpoints)", r"^suite/[^/]+/pass@\d+$"),
    Panel("suite_reward", "Suite mean reward per task (checkpoints)", r"^suite/[^/]+/reward_mean$"),
    Panel("suite_bounds", "Suite scores: bootstrap interval bounds", r"^suite/[^/]+/.+_(low|high)$"),
    # Catch-alls last: the rest of a namespace that has panels above.
    Panel("reward_other", "Reward diagnostics", r"^reward/"),
    Panel("episode_other", "Episodes", r"^episode/"),
    Panel("timing_other", "Timing (s)", r"^timing/"),
    Panel("async_other", "Asynchronous rollouts", r"^async/"),
)


def panel_for(key: str) -> Panel | None:
    """The first panel that claims `key`; None when none does (the page gives it its namespace's panel)."""
    return next((panel for panel in PANELS if panel.matches(key)), None)


# Panels a run fills later than its first step, by what its settings say it reports: the run page keeps
# their place in the grid from the start, so they do not push the other charts along when they appear.
VALIDATION_PANELS = ("val_reward", "val_criteria", "val_pass")


def reserved(spec: dict | None) -> list[str]:
    """Ids of the panels the run's settings promise (a run with `validation` reports val/ curves)."""
    return list(VALIDATION_PANELS) if isinstance(spec, dict) and spec.get("validation") else []
