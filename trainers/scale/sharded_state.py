"""A model's trainable weights and their optimiser state as sharded files (`torch.distributed.checkpoint`).

Every process writes the shards it holds, in parallel (`save_shards`); loading reads them back into
however many processes hold the model now, each taking the part its own shards cover
(`load_shards`: DCP reshards, so a run saved on 2 processes resumes on 1 or 3). A plain model in
one process, or a replicated one on several, goes the same way (DCP writes a replicated tensor
once). Only parameters that train are stored: all of them in a full fine-tune, the adapters of a
LoRA run (its frozen base comes from `model.path` again).

`export_model` writes an ordinary transformers folder (safetensors, config, tokenizer; a LoRA run's
adapters only), the full tensors gathered one parameter at a time into rank 0's CPU memory, never
a whole copy per process.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
    set_state_dict,
)

from trainers.scale.sharding import is_sharded

SHARDS_DIR = "dcp"  # inside a checkpoint folder
SHARDS_MARKER = f"{SHARDS_DIR}/.metadata"  # DCP writes it last: the shards are complete
MODEL, OPTIMIZER = "model", "optimizer"  # the two parts of the sharded state
TRAINABLE = StateDictOptions(ignore_frozen_params=True)
# Setting the loaded state leaves the frozen parameters alone (dcp.load has already refused a
# checkpoint that lacks any of the trainable ones).
LOAD_TRAINABLE = StateDictOptions(ignore_frozen_params=True, strict=False)


@contextmanager
def _alone_quietly() -> Iterator[None]:
    """DCP warns each time it reads or writes in a single process, which is how one-process runs use it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        yield


def distributed() -> bool:
    """Whether this process is one of a process group (else DCP reads and writes alone)."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def has_shards(folder: str | Path) -> bool:
    """Whether `folder` (a checkpoint) holds complete sharded weights."""
    return (Path(folder) / SHARDS_MARKER).is_file()


def _stored(model: torch.nn.Module, state: dict[str, Any]) -> dict[str, Any]:
    """The entries of a model state dict that a checkpoint stores: the trainable parameters, each
    once. `ignore_frozen_params` keeps the second name of a tied frozen parameter (a LoRA run's
    lm_head, tied to the frozen embeddings), and a tied trainable one would be written twice."""
    every = dict(model.named_parameters(remove_duplicate=False))
    once = dict(model.named_parameters())
    dropped = {name for name, p in every.items() if not p.requires_grad or name not in once}
    return {name: value for name, value in state.items() if name not in dropped}


def save_shards(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: str | Path) -> None:
    """Write this process's shards of the trainable weights and their optimiser state into `folder`.
    Every process of the group must call it (collective)."""
    model_state, optim_state = get_state_dict(model, optimizer, options=TRAINABLE)
    model_state = _stored(model, model_state)
    with _alone_quietly():
        dcp.save({MODEL: model_state, OPTIMIZER: optim_state}, checkpoint_id=str(folder), no_dist=not distributed())


def load_shards(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: str | Path) -> None:
    """Replace the trainable weights and the optimiser state with those saved in `folder`, at any
    number of processes. Every process of the group must call it (collective)."""
    # get_state_dict gives a fresh optimiser its state tensors (a zero-learning-rate step) to load into.
    model_state, optim_state = get_state_dict(model, optimizer, options=TRAINABLE)
    model_state = _stored(model, model_state)
    with _alone_quietly():
        dcp.load({MODEL: model_state, OPTIMIZER: optim_state}, checkpoint_id=str(folder), no_dist=not distributed())
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state, options=LOAD_TRAINABLE)


def load_model_shards(model: torch.nn.Module, folder: str | Path) -> None:
    """The trainable weights saved in `folder`, without the optimiser state (a model to evaluate)."""
    state = _stored(model, get_model_state_dict(model, options=TRAINABLE))
    with _alone_quietly():
        dcp.load({MODEL: state}, checkpoint_id=str(folder), no_dist=not distributed())
    set_model_state_dict(model, state, options=LOAD_TRAINABLE)


def load_full_optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """`optimizer.state_dict()` as one process saved it for the whole model (parameters numbered in
    the order of the model's trainable parameters), into an optimiser that may be sharded."""
    if not is_sharded(model):
        optimizer.load_state_dict(state)
        return
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    by_name = {
        "state": {names[i]: value for i, value in state["state"].items()},
        "param_groups": [{**group, "params": [names[i] for i in group["params"]]} for group in state["param_groups"]],
    }
    set_optimizer_state_dict(model, optimizer, by_name, options=StateDictOptions(full_state_dict=True))


def full_optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimiser state of the whole model keyed by parameter name, on rank 0 (CPU; other ranks {})."""
    return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def full_model_state(model: torch.nn.Module, *, trainable_only: bool = False) -> dict[str, torch.Tensor]:
    """The model's full tensors on rank 0's CPU, gathered one parameter at a time (other ranks get {}).
    Every process of the group must call it (collective) when the model is sharded."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=trainable_only)
    return get_model_state_dict(model, options=options)


def is_adapter_model(model: torch.nn.Module) -> bool:
    """A peft model (LoRA): its export is the adapters alone."""
    return hasattr(model, "peft_config")


def export_model(model: torch.nn.Module, tokenizer: Any, folder: str | Path, *, is_main: bool) -> None:
    """Write `folder` as an ordinary transformers folder (`from_pretrained` and vLLM load it): config,
    safetensors and tokenizer; for a LoRA model its adapters and adapter config. Rank 0 writes; every
    process of the group must call it when the model is sharded (the gather is collective)."""
    if is_sharded(model):
        state = full_model_state(model, trainable_only=is_adapter_model(model))
        if is_main:
            model.save_pretrained(folder, state_dict=state)
    elif is_main:  # every process holds the whole model: no gather
        model.save_pretrained(folder)
    if is_main:
        tokenizer.save_pretrained(folder)
