"""Shared fixtures for trainer tests: one tiny model per test session (built in ~1 s, no downloads)."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> Path:
    from trainers.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)
