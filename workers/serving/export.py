"""A checkpoint exported as a Hugging Face folder (save_pretrained: config, weights as safetensors,
tokenizer), on the worker: a LoRA checkpoint's adapters merged into the base weights, or kept as an
adapter folder (adapter_config.json + adapter weights, loaded with peft on top of the base); a
full-weights or sharded checkpoint written out whole.

Written beside its final place and renamed into it once whole, so a failed export leaves no
half-folder; an existing folder is never written over. A download is a zip of the folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

MERGED, ADAPTER = "merged", "adapter"


class ExportError(ValueError):
    """Why the export cannot be made (a folder already there, an adapter asked of full weights)."""


def export_folder(model_spec: dict[str, Any], model_path: str, checkpoint: str, out: Path, mode: str = MERGED,
                  zipped: bool = False) -> dict[str, Any]:  # fmt: skip
    """Write the checkpoint to `out`; {"folder", "kind" (merged, adapter, full), "files", "bytes", "zip"}."""
    import torch

    from trainers.models.loading import load_policy
    from trainers.spec import ModelSpec

    if out.exists():
        raise ExportError(f"{out.name} already exists: choose another name")
    spec = ModelSpec.model_validate({**model_spec, "path": model_path, "gradient_checkpointing": False})
    # On the CPU: an export needs no accelerator, and its task runs on the default queue beside GPU work.
    model, tokenizer = load_policy(spec, torch.device("cpu"), checkpoint=checkpoint or None)
    lora = hasattr(model, "merge_and_unload")
    if mode == ADAPTER and not lora:
        raise ExportError("this checkpoint holds full weights, not LoRA adapters: export it merged")
    kind = ("merged" if mode == MERGED else "adapter") if lora else "full"
    if lora and mode == MERGED:
        model = model.merge_and_unload()
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        model.save_pretrained(partial, safe_serialization=True)
        tokenizer.save_pretrained(partial)
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    files = sorted(p for p in out.rglob("*") if p.is_file())
    archive = shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name) if zipped else ""
    return {"folder": str(out), "kind": kind, "files": [str(p.relative_to(out)) for p in files],
            "bytes": sum(p.stat().st_size for p in files), "zip": archive}  # fmt: skip
