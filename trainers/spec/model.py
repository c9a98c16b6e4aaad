"""The policy model: a local folder or hub id, its dtype, LoRA adapters and a reference model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from trainers.access import MODEL, marks
from trainers.spec.base import Section


class LoraSpec(Section):
    """LoRA adapters (peft) trained instead of the full weights."""

    r: int = Field(16, ge=1, le=1024, description="LoRA rank.")
    alpha: int = Field(32, ge=1, description="LoRA alpha (scale = alpha / r).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the LoRA path.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        description="Module names to adapt (peft target_modules).",
    )


# A Hugging Face hub id as the Hub names repositories: "owner/name", each part 1 to 96 letters, digits,
# - _ . that starts and ends with a letter, digit or _ (huggingface_hub's validate_repo_id), no "--" or
# "..", not ending in ".git". The owner is required: a bare name is more often a mistyped folder.
_HUB_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?"
HUB_ID = re.compile(rf"{_HUB_PART}/{_HUB_PART}")
HUB_RULES = ("a hub id is owner/name (like Qwen/Qwen2.5-0.5B): letters, digits, - _ and ., each part up to 96 "
             "characters, starting and ending with a letter or digit, without -- or ..")  # fmt: skip


def looks_local(path: str) -> bool:
    """Whether a model path names a folder rather than a hub id: it starts with / . or ~, has more
    parts than owner/name or a '..' part (a hub id cannot), or exists here."""
    parts = path.split("/")
    return path.startswith(("/", ".", "~")) or len(parts) > 2 or ".." in parts or Path(path).expanduser().exists()


def model_path_shape_error(path: str) -> str | None:
    """Why `path` is neither a local folder path nor a well-formed hub id, or None.
    Checks the shape only: whether the folder exists is `model_folder_error`'s question, asked
    where the files are (the worker at run start, the studio for folders it shares with it)."""
    if looks_local(path):
        return None
    if HUB_ID.fullmatch(path) and "--" not in path and ".." not in path and not path.endswith(".git"):
        return None
    return f"{path!r} is not a local folder (start it with / ./ or ~/) and not a hub id: {HUB_RULES}"


def model_folder_error(path: str, *, adapters_ok: bool = False) -> str | None:
    """Why the local folder `path` cannot hold a model, or None: it must exist and hold a config.json
    (or, with `adapters_ok`, a checkpoint: a LoRA checkpoint's adapter_config.json, or the sharded
    weights of a checkpoint not exported as a transformers folder, dcp/.metadata). A hub id is not checked here."""
    if not looks_local(path):
        return None
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return f"folder {path} does not exist" if not folder.exists() else f"{path} is a file, not a model folder"
    names = ("config.json", "adapter_config.json", "dcp/.metadata") if adapters_ok else ("config.json",)
    if not any((folder / name).is_file() for name in names):
        return f"{path} has no config.json: not a model folder"
    return None


class ModelSpec(Section):
    """The policy to train: where it loads from, its dtype, memory savers and LoRA."""

    path: str = Field(
        ..., min_length=1,
        description="Local folder (save_pretrained layout) of a causal LM, or its Hugging Face hub id (owner/name), "
        "which the worker downloads when the run starts.",
        json_schema_extra=marks(MODEL),
    )  # fmt: skip
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        description="Weights dtype. bfloat16 weights lose every update smaller than their spacing (most of "
        "them at lr 1e-5); to train in bfloat16, keep float32 here and set optim.precision to bfloat16.",
    )
    trust_remote_code: bool = Field(False, description="Allow model code from the model folder.")
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory in the backward pass.")
    disable_dropout: bool = Field(
        True,
        description="Set the model's dropout to 0 (LoRA's own dropout is kept): with dropout on, the policy that "
        "sampled differs from the one trained and the on-policy ratio is not 1.",
    )
    lora: LoraSpec | None = Field(None, description="Train LoRA adapters instead of all weights (peft).")
    ref_path: str | None = Field(
        None, description="Reference model for KL; defaults to the initial policy.", json_schema_extra=marks(MODEL)
    )

    @field_validator("path", "ref_path")
    @classmethod
    def _folder_or_hub_id(cls, v: str | None) -> str | None:
        error = model_path_shape_error(v) if v else None
        if error:
            raise ValueError(error)
        return v
