"""Checkpoints: everything needed to continue a run exactly where it stopped.

    <output_dir>/checkpoints/step-<N>/
        model weights + tokenizer (save_pretrained; LoRA runs save only the adapters)
        trainer_state.pt: step, optimiser, scheduler, data position, curriculum (its generator
                          and per-prompt statistics), engine state, the random states of
                          python, numpy and torch (CPU and CUDA) and the hint levels

A resumed run samples the same prompts and the same completions as one that never
stopped, because all of that state is restored. The folder is written under a temporary
name and renamed when complete, so 'latest' never picks a half-written checkpoint.
"""

from __future__ import annotations

import random
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from trainers.spec import CheckpointSpec

if TYPE_CHECKING:
    from trainers.rollout.engines.base import RolloutEngine


class TrainerState(Protocol):
    """What a checkpoint saves and restores of a run (the `Trainer` has all of it)."""

    spec: Any  # RunSpec
    step_count: int
    model: Any
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    source: Any  # a prompt source with state_dict / load_state_dict
    curriculum: Any
    engine: RolloutEngine
    hinter: Any
    last_checkpoint: str | None


STATE_FILE = "trainer_state.pt"
_STEP_DIR = re.compile(r"step-(\d+)")


class CheckpointError(ValueError):
    """A checkpoint to resume from is missing or incomplete."""


def checkpoints_root(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = checkpoints_root(output_dir)
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.fullmatch(p.name)) and (p / STATE_FILE).exists()
    ]
    return [p for _, p in sorted(found)]


def resolve_resume(spec: CheckpointSpec) -> Path:
    """The folder named by `resume_from`: 'latest' is the newest complete one under output_dir."""
    if spec.resume_from == "latest":
        found = list_checkpoints(spec.output_dir)
        if not found:
            raise CheckpointError(f"resume_from='latest' but {checkpoints_root(spec.output_dir)} holds no checkpoint")
        return found[-1]
    path = Path(spec.resume_from)
    if not (path / STATE_FILE).exists():
        raise CheckpointError(f"{path} is not a checkpoint folder (no {STATE_FILE})")
    return path


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextmanager
def random_state_kept(engine: RolloutEngine, seed: int) -> Iterator[None]:
    """Run the block on its own random stream, seeded by `seed`, then put back python's, numpy's and
    torch's generators and the engine's sampling state as they were: sampling done inside (validation)
    leaves the training run's stream exactly where it was, and is itself the same after a resume."""
    saved, engine_state = rng_state(), engine.state_dict()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        set_rng_state(saved)
        engine.load_state_dict(engine_state)


def save_checkpoint(trainer: TrainerState) -> Path:
    """Write step-<N> for the trainer's current step, then drop all but the newest `keep_last`."""
    spec = trainer.spec.checkpoint
    final = checkpoints_root(spec.output_dir) / f"step-{trainer.step_count}"
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    trainer.model.save_pretrained(tmp)
    trainer.tokenizer.save_pretrained(tmp)
    torch.save(
        {
            "step": trainer.step_count,
            "optimizer": trainer.optimizer.state_dict(),
            "scheduler": trainer.scheduler.state_dict(),
            "data": trainer.source.state_dict(),
            "curriculum": trainer.curriculum.state_dict(),
            "engine": trainer.engine.state_dict(),
            "rng": rng_state(),
            "hints": trainer.hinter.schedule.state_dict() if trainer.hinter is not None else None,
        },
        tmp / STATE_FILE,
    )
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in list_checkpoints(spec.output_dir)[: -spec.keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_trainer_state(trainer: TrainerState, path: str | Path) -> None:
    """Restore what `save_checkpoint` wrote, except the weights (loaded with the model)."""
    # weights_only=False: the file is our own and holds numpy/python RNG state tuples.
    state = torch.load(Path(path) / STATE_FILE, map_location="cpu", weights_only=False)
    trainer.step_count = int(state["step"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.source.load_state_dict(state["data"])
    if "curriculum" in state:  # checkpoints written before curricula existed start it afresh
        trainer.curriculum.load_state_dict(state["curriculum"])
    trainer.engine.load_state_dict(state["engine"])
    set_rng_state(state["rng"])
    if trainer.hinter is not None and state.get("hints") is not None:  # checkpoints from before hints have none
        trainer.hinter.schedule.load_state_dict(state["hints"])
    trainer.last_checkpoint = str(path)
