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
