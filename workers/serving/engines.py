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
from pathlib import Path
from typing import Any

VLLM, TRANSFORMERS = "vllm", "transformers"
KEY_ENV = {VLLM: "VLLM_API_KEY", TRANSFORMERS: "ROLLOUT_SERVING_KEY"}  # the key in the env, never in argv


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
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--disable-log-requests",
        ]  # fmt: skip
    return [
        sys.executable, "-m", "workers.serving.hf_server", "--name", name, "--model-path", model_path,
        "--checkpoint", checkpoint, "--model-spec", json.dumps(model_spec), "--host", host, "--port", str(port),
    ]  # fmt: skip
