"""Which engine serves a model, and the command that starts its OpenAI-compatible server.

vLLM's own server where vLLM is installed and the weights are a full transformers folder (a base
model, or a checkpoint exported with its weights); the transformers server (`hf_server`) otherwise:
a LoRA checkpoint's adapters, sharded weights, or a worker without vLLM. settings.SERVING_ENGINE
("auto", "vllm", "transformers") chooses; "vllm" where it cannot serve falls back and says so in the log.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

VLLM, TRANSFORMERS = "vllm", "transformers"
KEY_ENV = {VLLM: "VLLM_API_KEY", TRANSFORMERS: "ROLLOUT_SERVING_KEY"}  # the key in the env, never in argv
# vLLM's CPU build reserves a share of the host's memory for its KV cache (0.92 by default) and refuses to
# start beside anything else; a serving process on a worker's CPU takes this much instead.
CPU_KV_CACHE_BYTES = 1 << 30


def answers(address: str, key: str) -> bool:
    """Whether the server at `address` is up: its /v1/models answers 200 to the key."""
    request = urllib.request.Request(f"{address}/v1/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def full_weights(checkpoint: str) -> bool:
    folder = Path(checkpoint)
    return (folder / "config.json").is_file() and not (folder / "adapter_config.json").exists()


def choose(preference: str, checkpoint: str) -> tuple[str, str]:
    """(engine, why): the engine for these weights under `preference`."""
    if preference == TRANSFORMERS:
        return TRANSFORMERS, "settings.SERVING_ENGINE is transformers"
    if not vllm_installed():
        return TRANSFORMERS, "vLLM is not installed on this worker"
    if checkpoint and not full_weights(checkpoint):
        return TRANSFORMERS, "the checkpoint is not a full transformers folder (LoRA adapters or sharded weights)"
    return VLLM, "vLLM is installed"


def command(engine: str, name: str, model_path: str, checkpoint: str, model_spec: dict[str, Any],
            host: str, port: int) -> list[str]:  # fmt: skip
    if engine == VLLM:
        return [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", checkpoint or model_path,
            "--served-model-name", name, "--host", host, "--port", str(port),
            "--dtype", "float32" if model_spec.get("dtype", "float32") == "float32" else "bfloat16",
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
            *([] if _has_cuda() else ["--kv-cache-memory-bytes", str(CPU_KV_CACHE_BYTES)]),
        ]  # fmt: skip
    return [
        sys.executable, "-m", "workers.serving.hf_server", "--name", name, "--model-path", model_path,
        "--checkpoint", checkpoint, "--model-spec", json.dumps(model_spec), "--host", host, "--port", str(port),
    ]  # fmt: skip
