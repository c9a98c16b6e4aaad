"""A sweepable experiment of Alice's team (validation every step, so every step reports the objective).

The sweep tests use the real Optuna on the test database through its own SQLAlchemy connection, which sees
only committed rows: they run as transaction tests (Django's usual per-test transaction would hide the rows
from Optuna's connection and hold the lock it needs)."""

import pytest
from django.test import override_settings

from studio.datasets import storage
from studio.datasets.models import Dataset
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from studio.sweeps import storage as sweep_storage
from tests.studio.base import ROWS, RUBRIC, model_folder, write_jsonl

SETTINGS = {"optim": {"total_steps": 3}, "validation": {"holdout_fraction": 0.5, "every_n_steps": 1}}
LR_AND_GROUP = [{"name": "optim.lr", "kind": "float", "low": 1e-6, "high": 1e-2, "log": True},
                {"name": "algorithm.group_size", "kind": "int", "low": 2, "high": 8, "step": 2}]  # fmt: skip


@pytest.fixture
def experiment(tmp_path, team, alice):
    data_dir = tmp_path / "var"
    data_dir.mkdir()
    with override_settings(DATA_DIR=data_dir, DATASET_ROOTS=[tmp_path]):
        path = write_jsonl(tmp_path / "qa.jsonl", ROWS * 4)
        dataset = Dataset(team=team, name="qa.jsonl", source="server_file", path=str(path), format="jsonl")
        storage.refresh(dataset)
        dataset.save()
        rubric = Rubric.objects.create(team=team, name="Correct", spec=RUBRIC, created_by=alice)
        model = model_folder(tmp_path / "models" / "tiny")
        yield Experiment.objects.create(team=team, name="Exp", dataset=dataset, rubric=rubric, model_path=str(model),
                                        config=SETTINGS, created_by=alice)  # fmt: skip


@pytest.fixture(autouse=True)
def fresh_storage():
    """Each test opens Optuna's storage anew (as a restarted studio does), on its own test database."""
    sweep_storage._storages.clear()
    yield
    for store in sweep_storage._storages.values():
        store.remove_session()
        store.engine.dispose()
    sweep_storage._storages.clear()
