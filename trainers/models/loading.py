"""Loading the policy (optionally with LoRA adapters) and the frozen reference model.

Real loading code for any local folder or hub id in `save_pretrained` layout; tests use a
tiny model built by `trainers.demos.tiny`.
"""

from __future__ import annotations

import copy
import inspect
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainers.models.hub import download_errors, prepare
from trainers.spec import ModelSpec, looks_local, model_folder_error

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class ModelFolderError(ValueError):
    """A local model folder that cannot load: missing, or without a config."""


def require_model_folder(path: str | Path, *, adapters_ok: bool = False) -> None:
    """Refuse a missing local folder with a plain message before transformers would read the
    path as a hub id and fail with a repo-id validation error that never says the folder is missing."""
    error = model_folder_error(str(path), adapters_ok=adapters_ok)
    if error:
        raise ModelFolderError(error)


def from_pretrained(auto_class, path: str | Path, **kwargs: Any):
    """`auto_class.from_pretrained(path, ...)`. A hub id is looked up once first (trainers.models.hub.prepare:
    no minute of retries where the Hub cannot be reached), and a download that fails ends the run
    with one line saying what to do (trainers.models.hub.ModelDownloadError)."""
    if looks_local(str(path)):
        return auto_class.from_pretrained(path, **kwargs)
    cache_only = prepare(str(path))
    with download_errors(str(path)):
        return auto_class.from_pretrained(path, **({"local_files_only": True} if cache_only else {}), **kwargs)


def load_tokenizer(path: str, *, trust_remote_code: bool = False):
    """The tokenizer, with a pad token (EOS when the model has none)."""
    from transformers import AutoTokenizer

    tokenizer = from_pretrained(AutoTokenizer, path, trust_remote_code=trust_remote_code)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(path: str, spec: ModelSpec, device: torch.device | None = None):
    from transformers import AutoModelForCausalLM

    require_model_folder(path)
    model = from_pretrained(AutoModelForCausalLM, path, dtype=DTYPES[spec.dtype],
                            trust_remote_code=spec.trust_remote_code)  # fmt: skip
    return model.to(device or default_device())


def load_policy(spec: ModelSpec, device: torch.device | None = None, *, checkpoint: str | Path | None = None):
    """(model, tokenizer) ready to train: LoRA adapters when `spec.lora`, gradient checkpointing
    when asked. `checkpoint` (a folder written by `trainers.run.checkpoint`) replaces the initial
    weights: full weights, or adapters on top of `spec.path` for a LoRA run; a checkpoint without
    a transformers export, its sharded weights read into the model of `spec.path` in this process."""
    if checkpoint is not None and not is_exported(checkpoint):
        # deferred: torch.distributed.checkpoint takes most of a second to import
        from trainers.scale.sharded_state import SHARDS_DIR, has_shards, load_model_shards

        if has_shards(checkpoint):
            model, tokenizer = load_policy(spec, device)
            load_model_shards(model, Path(checkpoint) / SHARDS_DIR)
            return model, tokenizer
    path = str(checkpoint or spec.path)
    require_model_folder(path, adapters_ok=checkpoint is not None)
    tokenizer = load_tokenizer(path, trust_remote_code=spec.trust_remote_code)
    if checkpoint is not None and is_adapter_folder(checkpoint):
        from peft import PeftModel

        base = load_causal_lm(spec.path, spec, device)
        if spec.disable_dropout:
            disable_dropout(base)
        model = PeftModel.from_pretrained(base, path, is_trainable=True)
    else:
        model = load_causal_lm(path, spec, device)
        if spec.disable_dropout:
            disable_dropout(model)
        if spec.lora is not None:
            model = _with_lora(model, spec)
    if spec.gradient_checkpointing:
        enable_activation_checkpointing(model)
    model.train()
    return model, tokenizer


def enable_activation_checkpointing(model) -> None:
    """Recompute each decoder layer's activations in the backward pass instead of keeping them
    (transformers' per-layer gradient checkpointing, non-reentrant: it composes with FSDP2, whose
    hooks run again for the recomputation). Call it before sharding."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if hasattr(model, "peft_config"):  # LoRA: frozen embeddings would cut the checkpointed graph
        model.enable_input_require_grads()


def disable_dropout(model: torch.nn.Module) -> None:
    """Dropout probability 0 everywhere: `nn.Dropout` modules, and the float attributes that
    attention implementations pass to SDPA / eager attention (`attention_dropout`, `dropout`)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for name in ("attention_dropout", "dropout"):
            if isinstance(getattr(module, name, None), float):
                setattr(module, name, 0.0)


def is_exported(path: str | Path) -> bool:
    """Whether a checkpoint folder holds its weights as a transformers folder (full weights or adapters)."""
    return any((Path(path) / name).is_file() for name in ("config.json", "adapter_config.json"))


def is_adapter_folder(path: str | Path) -> bool:
    """A peft adapter folder (LoRA checkpoint) rather than full weights."""
    return (Path(path) / "adapter_config.json").exists()


def _with_lora(model, spec: ModelSpec):
    from peft import LoraConfig, get_peft_model

    lora = spec.lora
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


@dataclass
class Reference:
    """The model KL is measured against. With LoRA it is the policy itself with its adapters
    switched off, which costs no memory; otherwise a frozen model."""

    model: Any
    adapters_off: bool = False

    def context(self) -> AbstractContextManager:
        return self.model.disable_adapter() if self.adapters_off else nullcontext()


def load_reference(spec: ModelSpec, policy, kl_beta: float, *, policy_is_initial: bool = True) -> Reference | None:
    """None when kl_beta == 0 (no KL, so no second model in memory). `policy_is_initial=False`
    (a resumed run) reloads the initial weights from `spec.path` instead of copying the policy."""
    if kl_beta == 0:
        return None
    device = next(policy.parameters()).device
    if spec.ref_path:
        model = load_causal_lm(spec.ref_path, spec, device)
    elif spec.lora is not None:
        return Reference(policy, adapters_off=True)
    elif policy_is_initial:
        model = copy.deepcopy(policy)  # the initial policy, before any update
    else:
        model = load_causal_lm(spec.path, spec, device)
    model.eval()
    model.requires_grad_(False)
    return Reference(model)


def trainable_parameters(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def accepts_logits_to_keep(model) -> bool:
    """Whether the forward can compute logits for the last positions only (`logits_to_keep`)."""
    forward = getattr(model, "get_base_model", lambda: model)().forward
    return "logits_to_keep" in inspect.signature(forward).parameters


def supports_lean_decode(model: Any) -> bool:
    """True for decoder-only models whose forward takes a transformers `DynamicCache`,
    position ids and an attention mask (Llama, Qwen2, Mistral, GPT-2, ...); False for
    encoder-decoders, stateful models (Mamba) and models with their own cache format."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return False
    supports_cache = getattr(model, "_supports_default_dynamic_cache", None)
    if supports_cache is None or not supports_cache():
        return False
    base = getattr(model, "get_base_model", lambda: model)()  # a peft wrapper forwards **kwargs
    params = inspect.signature(base.forward).parameters
    return all(name in params for name in ("past_key_values", "position_ids", "attention_mask"))
