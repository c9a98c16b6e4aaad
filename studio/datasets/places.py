"""Where datasets may be in the studio's data folder, as plain path rules: the demo folder anyone may
read, and what a split name may be. The path policy (studio.experiments.paths) and the dataset files
(studio.datasets.storage) both read them, so they live apart from either."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

DEMO_FOLDER = "demo"  # under DATA_DIR; see studio.bootstrap.make_demo


def demo_dir() -> Path:
    """Where studio.bootstrap puts the demo dataset and tiny model: the one part of DATA_DIR anyone may read."""
    return Path(settings.DATA_DIR).resolve() / DEMO_FOLDER


def is_split_name(split: str) -> bool:
    """A Hugging Face split is a subfolder name: a path there would read outside the dataset."""
    return not ("/" in split or "\\" in split or split in (".", ".."))


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents
