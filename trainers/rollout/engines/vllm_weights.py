"""Moving the trainer's weights into vLLM without writing a checkpoint.

Three pieces, all importable without vLLM or a GPU:

- `export_weights(model)`: (name, tensor) pairs named as in the model's own
  `save_pretrained` checkpoint, which is what vLLM's `model.load_weights` expects.
  A peft (LoRA) model is exported with its adapters merged into the base weights,
  so vLLM needs no LoRA support and sees exactly the policy being trained. A model
  sharded over processes (trainers.scale.sharding) is gathered one tensor at a time.
- `encode_weights` / `decode_weights`: safetensors bytes in base64 chunks, for
  pushing weights to a separate vLLM server through its `/collective_rpc` endpoint
  (which only passes strings).
- `WeightLoaderExtension`: mixed into vLLM's worker (`worker_extension_cls`); its methods
  are what `collective_rpc("rollout_studio_load_tensors" | "rollout_studio_load_weights", ...)` calls.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from trainers.scale.sharding import full_tensor, is_sharded

# peft wraps names: base_model.model.<hf name>, <module>.base_layer.weight, modules_to_save.default.
_PEFT_PREFIX = "base_model.model."
LOAD_WEIGHTS_RPC = "rollout_studio_load_weights"  # safetensors chunks, from a client over HTTP
LOAD_TENSORS_RPC = "rollout_studio_load_tensors"  # (name, tensor) pairs, in process
DEFAULT_CHUNK_BYTES = 256 * 2**20  # per HTTP request; big enough to amortise, small enough for proxies


def unwrap_model(model: Any) -> Any:
    """The module under DDP / FSDP-style `.module` wrappers (and torch.compile's `_orig_mod`)."""
    while True:
        inner = getattr(model, "module", None) or getattr(model, "_orig_mod", None)
        if inner is None:
            return model
        model = inner


def is_peft_model(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_adapter")


def hf_name(peft_name: str) -> str | None:
    """The checkpoint name of a peft parameter, or None for adapter-only tensors
    (lora_A/lora_B/...) and the frozen originals kept beside `modules_to_save` copies."""
    if "lora_" in peft_name or ".original_module." in peft_name:
        return None
    name = peft_name.removeprefix(_PEFT_PREFIX)
    return name.replace(".base_layer.", ".").replace(".modules_to_save.default.", ".")


@contextmanager
def merged_adapters(model: Any):
    """Merge LoRA adapters into the base weights for the duration of the block, then unmerge.
    The training model is unchanged afterwards (up to float rounding of W + BA - BA)."""
    model.merge_adapter()
    try:
        yield model
    finally:
        model.unmerge_adapter()


def _named_tensors(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    # state_dict, not named_parameters: it includes buffers a checkpoint has and keeps tied
    # weights under every name they are saved under (vLLM skips the ones it ties itself).
    for name, tensor in model.state_dict().items():
        yield name, tensor.detach()


def export_weights(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """(checkpoint name, tensor) pairs of the policy's current weights.

    For a peft model the adapters are merged while the pairs are produced: consume the
    iterator fully (as `load_weights` does) before training on. Tensors are views of the
    live weights, not copies: load them before the next optimiser step."""
    model = unwrap_model(model)
    if is_sharded(model):
        yield from gathered_weights(model)
        return
    if not is_peft_model(model):
        yield from _named_tensors(model)
        return
    with torch.no_grad(), merged_adapters(model):
        for name, tensor in _named_tensors(model):
            mapped = hf_name(name)
            if mapped is not None:
                yield mapped, tensor


def gathered_weights(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """(checkpoint name, whole tensor) pairs of a model sharded over processes, as `export_weights`
    names them, gathered one tensor at a time (`DTensor.full_tensor`): no process ever holds more
    than one whole tensor (a LoRA layer's base weight and adapters) at once. Gathering is
    collective: every process must consume the whole iterator, in step with the others (the names
    come in the model's state-dict order, the same everywhere). LoRA adapters are merged here, by
    the layer's own formula, since peft's in-place merge cannot run on shards."""
    peft = is_peft_model(model)
    for name, value in _state_entries(model, ""):
        mapped = hf_name(name) if peft else name
        if mapped is not None:  # decided by name: every process skips the same gathers
            yield mapped, value()


def _state_entries(module: torch.nn.Module, prefix: str) -> Iterator[tuple[str, Any]]:
    """(state-dict name, a function giving the whole tensor) in `state_dict` order: the module's
    parameters, its persistent buffers, then its children's. A LoRA layer's base weight comes with
    its adapters merged, and the adapters themselves are left out."""
    if _is_lora_layer(module):
        base = module.base_layer
        for name, param in base.named_parameters(recurse=False):
            merged = name == "weight"
            yield f"{prefix}base_layer.{name}", (lambda: _merged_lora_weight(module)) if merged else _whole(param)
        yield from _persistent_buffers(base, f"{prefix}base_layer.")
        return
    for name, param in module.named_parameters(recurse=False):
        yield prefix + name, _whole(param)
    yield from _persistent_buffers(module, prefix)
    for name, child in module.named_children():
        yield from _state_entries(child, f"{prefix}{name}.")


def _whole(tensor: torch.Tensor) -> Any:
    return lambda: full_tensor(tensor).detach()


def _persistent_buffers(module: torch.nn.Module, prefix: str) -> Iterator[tuple[str, Any]]:
    for name, buffer in module.named_buffers(recurse=False):
        if name not in module._non_persistent_buffers_set:  # as state_dict: persistent buffers only
            yield prefix + name, _whole(buffer)


def _is_lora_layer(module: torch.nn.Module) -> bool:
    """A peft LoRA layer (it wraps `base_layer` and holds `lora_A` / `lora_B` per adapter)."""
    return hasattr(module, "base_layer") and hasattr(module, "lora_A") and hasattr(module, "scaling")


def _merged_lora_weight(layer: Any) -> torch.Tensor:
    """W + sum over active adapters of scaling * B @ A (transposed for fan_in_fan_out layers), whole:
    what peft's `merge` writes into a linear layer's weight, computed from the gathered tensors."""
    weight = full_tensor(layer.base_layer.weight).detach()
    if layer.merged or layer.disable_adapters:
        return weight  # merged: the adapters are in the weight already; disabled: they take no part
    if not isinstance(layer.base_layer, torch.nn.Linear) or layer.lora_embedding_A:
        raise NotImplementedError(
            f"exporting a sharded LoRA model: only adapters on linear layers are merged, not on {type(layer.base_layer).__name__}"
        )
    for adapter in layer.active_adapters:
        if adapter not in layer.lora_A:
            continue
        if layer.use_dora.get(adapter) or getattr(layer.lora_B[adapter], "bias", None) is not None:
            raise NotImplementedError("exporting a sharded LoRA model: DoRA and LoRA biases are not merged")
        a = full_tensor(layer.lora_A[adapter].weight).detach().float()
        b = full_tensor(layer.lora_B[adapter].weight).detach().float()
        delta = b @ a
        if layer.fan_in_fan_out:
            delta = delta.T
        weight = (weight.float() + delta * layer.scaling[adapter]).to(weight.dtype)
    return weight


def chunked(weights: Iterable[tuple[str, torch.Tensor]], max_bytes: int) -> Iterator[dict[str, torch.Tensor]]:
    """Group (name, tensor) pairs into dicts of at most `max_bytes` (one tensor may exceed it alone)."""
    chunk: dict[str, torch.Tensor] = {}
    size = 0
    for name, tensor in weights:
        nbytes = tensor.numel() * tensor.element_size()
        if chunk and size + nbytes > max_bytes:
            yield chunk
            chunk, size = {}, 0
        chunk[name] = tensor
        size += nbytes
    if chunk:
        yield chunk


def encode_weights(tensors: dict[str, torch.Tensor]) -> str:
    """safetensors bytes of `tensors` (moved to CPU, made contiguous), base64 text."""
    from safetensors.torch import save

    # safetensors refuses tensors that share storage (tied embeddings); clone breaks the sharing.
    cpu = {name: t.detach().to("cpu").contiguous().clone() for name, t in tensors.items()}
    return base64.b64encode(save(cpu)).decode("ascii")


def decode_weights(payload: str, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Inverse of `encode_weights`."""
    from safetensors.torch import load

    tensors = load(base64.b64decode(payload.encode("ascii")))
    return {name: t.to(device) for name, t in tensors.items()}


class WeightLoaderExtension:
    """Mixed into vLLM's worker class by `worker_extension_cls`; vLLM gives the worker's own
    methods (`reload_weights`) and `self.device`. Start a server with
    `vllm serve <model> --worker-extension-cls trainers.rollout.engines.vllm_weights.WeightLoaderExtension`
    (this repository on the server's PYTHONPATH) to accept weights from `VLLMServerClient`."""

    def rollout_studio_load_tensors(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Load checkpoint-named tensors in place; returns how many. The colocated engine calls
        this in-process with `export_weights`' iterator itself: its tensors are views of the live
        (LoRA-merged) weights, valid only while it is being consumed, so it is read lazily here."""
        count = 0

        def counted() -> Iterator[tuple[str, torch.Tensor]]:
            nonlocal count
            for pair in weights:
                count += 1
                yield pair

        # reload_weights, not model.load_weights: after loading, vLLM post-processes some layers
        # into kernel layouts (the CPU backend repacks linear weights, quantised layers), and a
        # second plain load_weights no longer finds the checkpoint-shaped parameters.
        self.reload_weights(weights_iterator=counted(), is_checkpoint_format=True)
        return count

    def rollout_studio_load_weights(self, payload: str, last: str = "1") -> int:
        """Receive one chunk produced by `encode_weights`; on the last chunk (`last` == "1": the RPC
        endpoint passes strings only) load every chunk received so far in one go, since a layer's
        weights may span chunks and vLLM processes a layer once all of them have arrived. Returns
        the number of tensors loaded (0 until the last chunk)."""
        pending: dict[str, torch.Tensor] = self.__dict__.setdefault("_rollout_studio_pending", {})
        pending.update(decode_weights(payload))  # kept on the CPU until the load copies them in
        if last != "1":
            return 0
        self._rollout_studio_pending = {}
        return self.rollout_studio_load_tensors(pending.items())
