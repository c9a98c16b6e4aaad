"""Rollout: sampling episodes from the policy.

- `generate`       prompts in, scored groups of episodes out (`generate_and_score`), turn by turn
- `turn_tokens`    observation tokens rendered through the chat template between turns
- `engines/`       the rollout engines (transformers, vLLM colocated or as a server), by name in `catalog`
- `environments/`  what follows each turn: the interface, the kinds, the tools, their torch-free `catalog`

Import the submodule you need; this package imports nothing.
"""
