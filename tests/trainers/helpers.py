"""Small specs on the tiny model for trainer tests."""

from pathlib import Path
from typing import Any

from trainers.demo import demo_spec, make_demo_dataset
from trainers.spec import RunSpec


def tiny_spec(model_path: Path, tmp_path: Path, **overrides: Any) -> RunSpec:
    """The demo task, cut down to a few fast steps; `overrides` as in `demo_spec`."""
    data = make_demo_dataset(tmp_path / "letters.jsonl")
    base = {
        "optim": {"total_steps": 3, "prompts_per_step": 2, "micro_batch_size": 8},
        "algorithm": {"group_size": 4},
        "rollout": {"max_new_tokens": 6},
    }
    for section, values in overrides.items():
        base[section] = {**base.get(section, {}), **values} if isinstance(values, dict) else values
    return RunSpec.model_validate(demo_spec(model_path, data, tmp_path / "out", **base))
