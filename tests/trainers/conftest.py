"""Shared fixtures for trainer tests: one tiny model per test session (built in ~1 s, no downloads),
and the check that the real vLLM is installed where it should be."""

import platform
from pathlib import Path

import pytest

from trainers.rollout.engines.availability import vllm_unavailable_reason

# vLLM publishes CPU builds for these; elsewhere its tests skip instead of failing.
VLLM_PLATFORMS = {("Linux", "x86_64"), ("Linux", "aarch64")}


@pytest.fixture(scope="session")
def vllm_here() -> None:
    """Fails (does not skip) where ./studioctl setup should have installed vLLM but did not."""
    reason = vllm_unavailable_reason()
    if reason is None:
        return
    if (platform.system(), platform.machine()) not in VLLM_PLATFORMS:
        pytest.skip(f"vLLM has no build for {platform.system()} {platform.machine()}")
    pytest.fail(f"vLLM should run on this machine: {reason}")


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> Path:
    from trainers.demos.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


# Where `./studioctl setup` converts the packaged real model when STUDIO_DATA_DIR is not set
# (DATA_DIR/demo): the tests reuse that conversion instead of making their own.
REAL_MODELS_DIR = Path(__file__).resolve().parents[2] / "var" / "demo"


@pytest.fixture(scope="session")
def real_model_path() -> Path:
    """SmolLM2-135M-Instruct as a transformers folder (bf16 weights, its ChatML template).
    Fails (does not skip) where ./studioctl setup should have installed the package but did not."""
    from trainers.models.pretrained import SMOLLM2, PretrainedError, install

    try:
        return install(SMOLLM2, REAL_MODELS_DIR, progress=lambda line: None)
    except PretrainedError as exc:
        pytest.fail(f"the real model should be installed by ./studioctl setup: {exc}")
