"""Fixtures of the dataset tests: a data folder of their own, and a real Celery worker for the check
of every row."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest


@pytest.fixture
def data_dir(tmp_path, settings) -> Path:
    """Laid out like a checkout: the studio's data folder inside the one datasets may be registered from."""
    settings.DATA_DIR = tmp_path / "var"
    settings.DATA_DIR.mkdir()
    settings.DATASET_ROOTS = [tmp_path]
    return settings.DATA_DIR


@contextmanager
def start_check_worker():
    """A Celery worker in this process, consuming the default queue of the broker the settings name
    (memory:// without REDIS_URL, the test run's Redis with it), with the tasks that workers.app
    registers. Its thread has its own database connection, so a test using it needs committed rows:
    transactional_db (under which on_commit sends at once)."""
    from celery.contrib.testing.worker import start_worker

    import workers.tasks  # noqa: F401 - registers workers.check_dataset by name, as workers.app does
    from studio.celery import app

    with start_worker(app, queues=["default"], pool="solo", perform_ping_check=False, shutdown_timeout=30) as worker:
        yield worker


@pytest.fixture
def check_worker(transactional_db):
    with start_check_worker() as worker:
        yield worker
