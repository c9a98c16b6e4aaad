"""Rewards: rubrics of weighted criteria that score completions.

- `catalog`: criterion kinds and their parameter schemas (what the studio renders/validates).
- `sample`: `Sample` (prompt, completion, row fields) and `RubricResult`.
- `criteria/`: one module per kind, registered in `criteria.CRITERIA`; all score batches.
- `rubric`: `Rubric.from_spec(spec).score(samples)`, and `score_pairs` for scoring without training.
- `formula`: safe arithmetic over criterion names (`validate_formula` for the studio).

User reward code and model-written programs run in `trainers.sandbox`.

Nothing here imports torch at module level; only the local LLM judge loads transformers, lazily.
"""
