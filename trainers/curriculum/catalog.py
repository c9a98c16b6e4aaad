"""Names and one-line descriptions of the prompt samplers and rollout budgets.

Imports without numpy or torch so the spec (and through it the studio's form) can list and
validate the choices; `samplers.py` and `budgets.py` hold the entries, and
`tests/trainers/curriculum/test_catalog.py` checks that both list the same names.
"""

SAMPLERS: dict[str, str] = {
    "uniform": "Every prompt once per epoch, in the data's (seeded, shuffled) order: today's behaviour.",
    "online_difficulty": "Thompson sampling from each prompt's Beta posterior of its pass rate, picking the prompts "
    "nearest target_pass_rate (MoPPS, VADE); exploration_floor of each batch drawn uniformly.",
    "skip_solved": "Data order, skipping prompts whose last skip_after groups all passed (or all failed); "
    "a skipped prompt is re-checked with probability recheck_rate.",
}

BUDGETS: dict[str, str] = {
    "fixed": "algorithm.group_size rollouts for every prompt: today's behaviour.",
    "knapsack": "A total of rollouts_per_step split into per-prompt group sizes (min_group_size..max_group_size) "
    "by expected signal per rollout: the gain in P(group holds a pass and a fail) (Knapsack RL; harder prompts get "
    "more, as in Depth-Breadth Synergy).",
    "brorl": "max_group_size rollouts for every prompt (BroRL's broad exploration), generated generation_chunk "
    "sequences at a time so memory stays bounded.",
}
