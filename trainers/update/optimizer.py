"""The optimiser and its learning-rate schedule: AdamW over the trainable parameters; linear warm-up,
then constant, linear or cosine decay, stepped once per training step whether or not it updated."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch

from trainers.models.loading import trainable_parameters
from trainers.scale.sharding import full_tensor
from trainers.spec.optim import OptimSpec


def lr_lambda(schedule: str, warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """Multiplier of the peak lr at scheduler step s: linear warm-up, then constant / linear / cosine decay."""

    def factor(s: int) -> float:
        if s < warmup_steps:
            return (s + 1) / (warmup_steps + 1)
        progress = min(1.0, (s - warmup_steps) / max(1, total_steps - warmup_steps))
        if schedule == "linear":
            return 1.0 - progress
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return factor


def make_optimizer(model: torch.nn.Module, optim: OptimSpec) -> torch.optim.Optimizer:
    return torch.optim.AdamW(
        trainable_parameters(model),
        lr=optim.lr,
        betas=(optim.beta1, optim.beta2),
        weight_decay=optim.weight_decay,
    )


def make_scheduler(optimizer: torch.optim.Optimizer, optim: OptimSpec) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda(optim.lr_scheduler, optim.warmup_steps, optim.total_steps)
    )


def advance_schedule(scheduler: torch.optim.lr_scheduler.LRScheduler) -> float:
    """Step the learning-rate schedule; returns the rate this step's update used."""
    lr = scheduler.get_last_lr()[0]
    with warnings.catch_warnings():
        # The schedule counts steps, updated or not; torch warns when a step had no optimiser step.
        warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
        scheduler.step()
    return lr


def apply_gradients(model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_grad_norm: float | None) -> float:
    """Clip the accumulated gradients (sharded, FSDP has reduced them over the processes during the
    backward passes), step the optimiser; returns the gradient norm before clipping."""
    params = trainable_parameters(model)
    max_norm = max_grad_norm if max_grad_norm is not None else float("inf")
    # Sharded, the norm is a DTensor over the mesh (its square summed over the shards).
    grad_norm = full_tensor(torch.nn.utils.clip_grad_norm_(params, max_norm)).item()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm
