"""Mixed precision for the trainer's forward passes (`optim.precision`)."""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch


def autocast(model, precision: str) -> AbstractContextManager:
    """torch.autocast on the model's device: with "bfloat16", matmuls and attention run in bfloat16
    while the weights (the optimiser's master copy) stay in `model.dtype`; with "float32", nothing.
    The logprob math casts each chunk's logits to float32 (trainers.update.logprobs), so the ratio, KL and
    loss are float32 either way."""
    if precision not in ("float32", "bfloat16"):
        raise ValueError(f"unknown precision {precision!r}; valid: float32, bfloat16")
    param = next(model.parameters())
    # A sharded parameter (FSDP2, a DTensor) computes on its mesh's device, even when CPU offload
    # keeps it in CPU memory between passes.
    mesh = getattr(param, "device_mesh", None)
    device_type = mesh.device_type if mesh is not None else param.device.type
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=precision == "bfloat16")
