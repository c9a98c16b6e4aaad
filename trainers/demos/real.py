"""The real-model demo: SmolLM2-135M-Instruct (`trainers.models.pretrained`) learns to answer generated
arithmetic with the number alone: the held-out curve rises within a few steps on a CPU.

Task: "What is 7 + 5?" -> "12". Out of the box the model answers in prose (about 1 in 25 answers
ends on the right number, almost none is a bare number), so the rubric rewards both what was asked
and the shape: `correct` (the last number in the completion equals the sum, math-verified) and
`brief` (1 for up to 8 characters, 0.02 less per character beyond), which counts only when
`correct` does. A tenth of the rows are held out for validation, whose reward and pass rate are the
`val/` curves on the run page.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from trainers.demos.demo import with_overrides, write_rows

DATASET_NAME = "Small sums"
DATASET_DESCRIPTION = (
    "Generated additions of two numbers from 1 to 20, answered with the number: 'What is 7 + 5?' -> 12."
)
RUBRIC_NAME = "Right number, alone"
RUBRIC_DESCRIPTION = (
    "The last number in the completion is the sum (0.6); the shorter the answer the better, a bare number best (0.4)."
)
EXPERIMENT_NAME = "Demo: SmolLM2-135M-Instruct learns to answer sums"
EXPERIMENT_DESCRIPTION = (
    "A real pretrained model (135 M parameters) learns to answer with the number alone; "
    "held-out validation (every 2 steps) rises within a few steps; each step takes minutes on a CPU, seconds on a GPU."
)

PROMPT = "What is {a} + {b}?"
SYSTEM_PROMPT = "Answer with the number only."
LOW, HIGH = 1, 20


def real_rows(count: int = 400, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        a, b = rng.randint(LOW, HIGH), rng.randint(LOW, HIGH)
        rows.append({"id": f"sum-{i}", "prompt": PROMPT.format(a=a, b=b), "answer": str(a + b)})
    return rows


def make_real_dataset(path: str | Path, count: int = 400, seed: int = 0) -> Path:
    """Write the demo's rows as JSONL and return the path."""
    return write_rows(real_rows(count, seed), path)


def real_rubric() -> dict[str, Any]:
    return {
        # Brevity counts only when the number is right: scored alone, it gave a wrong bare answer
        # ("Eight." for 20 + 19) the group's top advantage, teaching shortness over sums.
        "combine": "formula",
        "formula": "correct * (0.6 + 0.4 * brief)",
        "criteria": [
            {"name": "correct", "kind": "math_equiv", "weight": 0.6, "params": {"extract": "last_number"}},
            # A bare-number check alone gave no signal: in 30 steps not one sample in 64 per step was a
            # bare number, so nothing moved towards it. Shortness, scored by degrees, leads there.
            {
                "name": "brief",
                "kind": "length",
                "weight": 0.4,
                "params": {"unit": "chars", "target_min": 1, "target_max": 8, "slope": 0.02},
            },
        ],
        "pass_threshold": 0.6,  # passed = the right number, however it is phrased
    }


def real_demo_spec(
    model_path: str | Path, data_path: str | Path, output_dir: str | Path, **overrides: Any
) -> dict[str, Any]:
    """A RunSpec config (dict) for the demo; `overrides` replace a top-level section's keys."""
    spec: dict[str, Any] = {
        "name": "small-sums",
        "model": {"path": str(model_path), "dtype": "float32"},
        "data": {
            "path": str(data_path),
            "prompt_field": "prompt",
            "answer_field": "answer",
            "system_prompt": SYSTEM_PROMPT,
            "max_prompt_tokens": 64,
        },
        "rubric": real_rubric(),
        "algorithm": {"preset": "grpo", "group_size": 8, "kl_beta": 0.0},
        "rollout": {"max_new_tokens": 32, "temperature": 1.0, "generation_batch_size": 64},
        "optim": {
            "lr": 1e-5,
            "prompts_per_step": 4,
            "micro_batch_size": 16,
            "total_steps": 20,
            "warmup_steps": 0,
            "max_grad_norm": 1.0,
            "seed": 0,
        },
        "validation": {"holdout_fraction": 0.1, "every_n_steps": 2, "num_prompts": 16, "samples_per_prompt": 1},
        "checkpoint": {"output_dir": str(output_dir), "every_n_steps": 0, "keep_last": 1},
    }
    return with_overrides(spec, overrides)
