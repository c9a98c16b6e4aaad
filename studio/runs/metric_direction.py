"""Which way a metric is better, so a runs table's "best" column knows whether to take a run's highest or lowest
value (issue 41). A guess from the key's name, as the DESIGN's metric keys are spelled: losses, KL, timings,
truncation and error rates are better low; rewards, pass@k, accuracies and everything else are better high. The
table's `max:` and `min:` columns let a user overrule the guess."""

from __future__ import annotations

# Parts of a key that mark a metric better low: `actor/loss`, `actor/kl`, `timing/step_s`, `response/truncated_frac`,
# `reward/frac_zero_std_groups` (groups that teach nothing), `eval/error_rate`.
LOWER_BETTER_PARTS = ("loss", "kl", "timing", "truncated", "zero_std", "error", "grad_norm", "staleness", "perplexity")


def higher_is_better(key: str) -> bool:
    """Whether a higher value of the metric `key` is better (see the module docstring)."""
    parts = key.lower().replace("-", "_").split("/")
    return not any(mark in part for part in parts for mark in LOWER_BETTER_PARTS)
