"""Checkpoints: everything needed to continue a run where it stopped, on as many processes or another number.

    <output_dir>/checkpoints/step-<N>/
        dcp/               the trainable weights and their optimiser state (`trainers.scale.sharded_state`):
                           each process writes its own shards, in parallel (a LoRA run: the adapters)
        ranks/rank-<r>.pt  process r's random states (python, numpy, torch CPU and CUDA) and its
                           rollout engine's state: both differ per process
        trainer_state.pt   written by rank 0: step, process count, scheduler, data position,
                           curriculum (its generator and per-prompt statistics), hint levels (the same
                           on every process)
        tokenizer files
        config.json + model.safetensors (a LoRA run: adapter_config.json + adapter_model.safetensors)
                           in the run's final checkpoint only: an ordinary transformers folder

Every checkpoint loads as a model through `load_policy(checkpoint=...)`: the final one from its
transformers files, the others from their shards on top of `model.path` (`trainers.models.loading`).

Resuming restores all of it, so on the same number of processes a resumed run samples the same
prompts and the same completions as one that never stopped. On another number of processes the
weights and optimiser state are resharded exactly (DCP); process r takes the random and engine
state of the old process r where there was one, and otherwise seeds python, numpy and torch from
(seed, step, r) (`derived_seed`) and takes rank 0's engine state. The run then continues
deterministically, but it cannot sample what the old run would have: a step's prompts are split
over the processes differently.

Checkpoints from before sharding (save_pretrained weights, the optimiser inside trainer_state.pt)
still resume: the weights load with the model (`initial_weights`), the optimiser state by
parameter order; rank 0 gets the saved random state, other processes derive theirs.

The folder is written under a temporary name and renamed, by rank 0, once every process has
written its part, so 'latest' never picks a half-written checkpoint. Every process writes into the
same folder and may read any process's shards when resuming: the processes of a run over several
nodes must share the filesystem that holds output_dir.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from trainers.report import PlainFailure
from trainers.run.checkpoint_folders import folder_name, step_of
from trainers.run.seeding import seed_everything
from trainers.scale.distributed import DistInfo, any_process
from trainers.scale.sharded_state import (
    SHARDS_DIR,
    distributed,
    export_model,
    has_shards,
    load_full_optimizer_state,
    load_shards,
    save_shards,
)
from trainers.spec import CheckpointSpec

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from trainers.curriculum.hints import Hinter
    from trainers.curriculum.state import Curriculum
    from trainers.data.procedural.source import ProceduralSource
    from trainers.data.source import PromptSource
    from trainers.rollout.engines.base import RolloutEngine
    from trainers.spec import RunSpec


class TrainerState(Protocol):
    """What a checkpoint saves and restores of a run (the `Trainer` has all of it); `step_count` and
    `last_checkpoint` are set on resuming."""

    spec: RunSpec
    step_count: int
    model: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    source: PromptSource | ProceduralSource
    curriculum: Curriculum
    engine: RolloutEngine
    hinter: Hinter | None
    last_checkpoint: str | None
    validation_pending: bool


STATE_FILE = "trainer_state.pt"
RANKS_DIR = "ranks"


class CheckpointSchedule:
    """When a run's checkpoint is due: every `every_n_steps` steps, or once `every_n_minutes` have passed since
    the last save (or since the schedule was made, with the run); every process gets the same answer (their
    clocks differ by a little)."""

    def __init__(self, spec: CheckpointSpec, dist: DistInfo, device: torch.device) -> None:
        self.spec = spec
        self.dist = dist
        self.device = device
        self.saved_at = time.monotonic()

    def due(self, step: int) -> bool:
        every, minutes = self.spec.every_n_steps, self.spec.every_n_minutes
        if every and step % every == 0:
            return True
        if not minutes:
            return False
        return any_process(time.monotonic() - self.saved_at >= minutes * 60, self.dist, self.device)

    def saved(self) -> None:
        """A checkpoint was just written: the minutes count from now."""
        self.saved_at = time.monotonic()


class CheckpointError(ValueError):
    """A checkpoint to resume from is missing or incomplete."""


def checkpoints_root(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = checkpoints_root(output_dir)
    if not root.is_dir():
        return []
    found = [(step, p) for p in root.iterdir() if (step := step_of(p.name)) is not None and (p / STATE_FILE).exists()]
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


def rank_file(path: str | Path, rank: int) -> Path:
    """Process `rank`'s own state (random states, engine) inside a checkpoint folder."""
    return Path(path) / RANKS_DIR / f"rank-{rank}.pt"


def derived_seed(seed: int, step: int, rank: int) -> int:
    """The seed of a process that resumes without a saved random state of its own (a checkpoint
    written by fewer processes): a function of the run's seed, the step and the process alone."""
    return int(np.random.SeedSequence([seed, step, rank]).generate_state(1)[0])


def _place() -> tuple[int, int]:
    """(rank, number of processes) of this process; (0, 1) without a process group."""
    if distributed():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _barrier() -> None:
    if distributed():
        torch.distributed.barrier()


def initial_weights(path: str | Path | None) -> Path | None:
    """The folder `load_policy` takes the weights from when resuming from `path`: an old checkpoint
    holds them as a transformers folder; a sharded one's are loaded by `load_trainer_state`, into
    the model as this run holds it (sharded or not), so the model starts from `model.path`."""
    return None if path is None or has_shards(path) else Path(path)


class CheckpointWriteError(PlainFailure, RuntimeError):
    """A checkpoint could not be written (a full disk, usually); the newest complete one is kept."""


def _cause(exc: BaseException) -> BaseException:
    """What a rank raised inside torch's distributed checkpoint (its CheckpointException holds each failed
    rank's exception), else `exc` itself."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        first = next(iter(failures.values()))
        if isinstance(first, tuple) and first and isinstance(first[0], BaseException):
            return first[0]
    return exc


def save_checkpoint(trainer: TrainerState, *, final: bool = False) -> Path:
    """Write step-<N> for the trainer's current step, then drop all but the newest `keep_last`.
    Every process calls it: each writes its shards and its own state, rank 0 the rest. The final
    checkpoint (`final`, or the run's last step) is also exported as a transformers folder.

    A write that fails (a disk that fills: torch's distributed checkpoint says so as a CheckpointException,
    a BaseException, with no word of space) removes its half-written folder and raises
    `CheckpointWriteError` saying how much space is left and which checkpoint is kept."""
    spec = trainer.spec.checkpoint
    rank, world = _place()
    done = checkpoints_root(spec.output_dir) / folder_name(trainer.step_count)
    tmp = done.with_name(done.name + ".tmp")
    if rank == 0:
        for stale in done.parent.glob("step-*.tmp"):  # left by a write that failed or a process killed
            shutil.rmtree(stale, ignore_errors=True)
        (tmp / RANKS_DIR).mkdir(parents=True)
    _barrier()  # the empty folder exists before anyone writes into it
    try:
        _write_parts(trainer, tmp, rank, world, final=final)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - CheckpointException is a BaseException
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        free = shutil.disk_usage(done.parent).free / 2**20 if done.parent.exists() else float("nan")
        kept = f"the newest complete checkpoint, {trainer.last_checkpoint}, is kept" if trainer.last_checkpoint else (
            "no earlier checkpoint exists")  # fmt: skip
        cause = _cause(exc)
        raise CheckpointWriteError(
            f"could not write checkpoint {done.name} in {done.parent} ({free:.1f} MiB free there): "
            f"{type(cause).__name__}: {cause}; {kept}"
        ) from exc
    _barrier()  # every process's files are written: the checkpoint may become complete
    if rank == 0:
        # The step's folder is replaced only once the new one is whole (a re-save of the same step).
        previous = done.with_name(done.name + ".old")
        if done.exists():
            shutil.rmtree(previous, ignore_errors=True)
            done.rename(previous)
        tmp.rename(done)
        shutil.rmtree(previous, ignore_errors=True)
        for old in list_checkpoints(spec.output_dir)[: -spec.keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    _barrier()  # on every process, a returned checkpoint is complete
    return done


def _write_parts(trainer: TrainerState, tmp: Path, rank: int, world: int, *, final: bool) -> None:
    """This process's part of a checkpoint into `tmp`: its shards and its own state; rank 0 the rest."""
    save_shards(trainer.model, trainer.optimizer, tmp / SHARDS_DIR)
    torch.save({"rng": rng_state(), "engine": trainer.engine.state_dict()}, rank_file(tmp, rank))
    if final or trainer.step_count >= trainer.spec.optim.total_steps:
        export_model(trainer.model, trainer.tokenizer, tmp, is_main=rank == 0)
    elif rank == 0:
        trainer.tokenizer.save_pretrained(tmp)
    if rank == 0:
        torch.save(
            {
                "step": trainer.step_count,
                "world_size": world,
                "scheduler": trainer.scheduler.state_dict(),
                "data": trainer.source.state_dict(),
                "curriculum": trainer.curriculum.state_dict(),
                "hints": trainer.hinter.schedule.state_dict() if trainer.hinter is not None else None,
                # A stop cut this step's validation short: the resumed run validates the step first.
                "validation_pending": trainer.validation_pending,
            },
            tmp / STATE_FILE,
        )


def _own_state(path: Path, state: dict[str, Any], rank: int) -> dict[str, Any] | None:
    """Process `rank`'s saved random and engine state, or None when the checkpoint has none for it."""
    if "rng" in state:  # an old checkpoint: rank 0's, inside trainer_state.pt
        return {"rng": state["rng"], "engine": state["engine"]} if rank == 0 else None
    file = rank_file(path, rank)
    # weights_only=False: the file is our own and holds numpy/python RNG state tuples.
    return torch.load(file, map_location="cpu", weights_only=False) if file.exists() else None


def load_trainer_state(trainer: TrainerState, path: str | Path) -> None:
    """Restore what `save_checkpoint` wrote into a trainer built for this run, on any number of
    processes (every process calls it). An old checkpoint's weights came with the model (`initial_weights`)."""
    path = Path(path)
    rank, _ = _place()
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)  # our own file (see _own_state)
    trainer.step_count = int(state["step"])
    trainer.validation_pending = bool(state.get("validation_pending", False))  # older checkpoints: validated
    if has_shards(path):
        load_shards(trainer.model, trainer.optimizer, path / SHARDS_DIR)
    else:
        load_full_optimizer_state(trainer.model, trainer.optimizer, state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.source.load_state_dict(state["data"])
    if "curriculum" in state:  # checkpoints written before curricula existed start it afresh
        trainer.curriculum.load_state_dict(state["curriculum"])
    if trainer.hinter is not None and state.get("hints") is not None:  # checkpoints from before hints have none
        trainer.hinter.schedule.load_state_dict(state["hints"])
    own = _own_state(path, state, rank)
    if own is None:  # a process the checkpoint had no counterpart of
        own = {"engine": (_own_state(path, state, 0) or {}).get("engine", {})}
        seed_everything(derived_seed(trainer.spec.optim.seed, trainer.step_count, rank))
    else:
        set_rng_state(own["rng"])
    trainer.engine.load_state_dict(own["engine"])
    trainer.last_checkpoint = str(path)
