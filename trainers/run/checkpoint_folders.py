"""The name of a run's checkpoint folder, `<output_dir>/checkpoints/step-<N>/`, without torch: the
trainer writes and lists them (trainers.run.checkpoint), the studio reads a checkpoint's step from its
path (studio.runs.lifecycle) without importing the trainer."""

from __future__ import annotations

import re

STEP_DIR = re.compile(r"step-(\d+)")


def folder_name(step: int) -> str:
    return f"step-{step}"


def step_of(name: str) -> int | None:
    """The step a checkpoint folder's name says (`step-12` -> 12), None for any other name."""
    match = STEP_DIR.fullmatch(name)
    return int(match.group(1)) if match else None
