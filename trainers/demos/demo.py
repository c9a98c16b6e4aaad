"""A toy task a tiny random-init model learns in well under a minute on a CPU: the demo run
of the studio and the trainer's learning test.

Task: "Repeat the letter: c" -> a completion made of that letter. The reward is the
fraction of the completion's non-space characters equal to the requested letter, scored
on the completion only. A random model earns a little by chance (~0.03), which gives
the first gradients.

The prompt matters: with L letters, a policy that ignores the prompt earns at most 1/L
on average (its characters' fractions over the L letters sum to at most 1), so a mean
reward above 1/L shows that the model reads which letter was asked for. Four letters
keep the run short on a CPU; with more, the tiny model tends to settle first on words
that contain several of the letters ("the" for t, h, e) and needs far more steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PROMPT = "Repeat the letter: {letter}"
# Phrasings never trained on: evaluating on them shows the model finds the letter, not a memorised prompt.
HELD_OUT_PROMPTS = ("Say the letter: {letter}", "Write the letter: {letter}", "Letter: {letter}")

# Run in the rubric sandbox; `answer` is the requested letter.
LETTER_FRACTION_CODE = """\
def score(prompt, completion, answer, **fields):
    chars = [c for c in completion if not c.isspace()]
    if not chars:
        return 0.0, "empty completion"
    hits = sum(c == answer for c in chars)
    return hits / len(chars), f"{hits} of {len(chars)} characters are {answer!r}"
"""


DEMO_LETTERS = "abcd"


def demo_rows(letters: str = DEMO_LETTERS, prompts: tuple[str, ...] = (PROMPT,)) -> list[dict[str, str]]:
    return [{"prompt": prompt.format(letter=c), "answer": c} for prompt in prompts for c in letters]


def write_rows(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Rows (dicts) as a JSONL dataset at `path` (folders made); returns the path. Every demo writes its data so."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def make_demo_dataset(path: str | Path, letters: str = DEMO_LETTERS, prompts: tuple[str, ...] = (PROMPT,)) -> Path:
    """Write the demo prompts as JSONL (one row per phrasing and letter) and return the path.
    `prompts=HELD_OUT_PROMPTS` writes the held-out evaluation set."""
    return write_rows(demo_rows(letters, prompts), path)


def demo_rubric() -> dict[str, Any]:
    return {
        "criteria": [
            {"name": "letter", "kind": "python", "weight": 1.0, "params": {"code": LETTER_FRACTION_CODE}},
        ],
        "pass_threshold": 0.75,
    }


def demo_spec(
    model_path: str | Path, data_path: str | Path, output_dir: str | Path, **overrides: Any
) -> dict[str, Any]:
    """A RunSpec config (dict) for the demo task; `overrides` replace whole top-level sections' keys,
    e.g. demo_spec(..., optim={"total_steps": 10})."""
    spec: dict[str, Any] = {
        "name": "repeat-the-letter",
        "model": {"path": str(model_path)},
        "data": {"path": str(data_path), "prompt_field": "prompt", "answer_field": "answer"},
        "rubric": demo_rubric(),
        "algorithm": {
            "preset": "grpo",
            "group_size": 8,
            "advantage_estimator": "grpo",
            "policy_loss": "ppo_clip",
            "loss_agg_mode": "token-mean",
            "kl_beta": 0.0,
        },
        "rollout": {"max_new_tokens": 8, "temperature": 1.0, "generation_batch_size": 64},
        "optim": {
            "lr": 2e-3,
            "prompts_per_step": 8,
            "micro_batch_size": 64,
            "total_steps": 120,
            "warmup_steps": 0,
            "max_grad_norm": 1.0,
            "seed": 0,
        },
        "checkpoint": {"output_dir": str(output_dir), "every_n_steps": 0, "keep_last": 1},
        "eval": {"samples_per_prompt": 4},
    }
    return with_overrides(spec, overrides)


def with_overrides(spec: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`spec` with each override's keys replacing those of its top-level section (a whole
    section replaced when either side is not a dict)."""
    for section, values in overrides.items():
        if isinstance(values, dict) and isinstance(spec.get(section), dict):
            spec[section] = {**spec[section], **values}
        else:
            spec[section] = values
    return spec
