"""A base test case with the people of tests/studio/people.py and one team's objects."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from django.test import override_settings
from rest_framework.test import APIClient, APITestCase

from studio.accounts.models import Team
from studio.datasets import storage
from studio.datasets.models import Dataset
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from studio.runs.models import Run
from tests.studio import people

RUBRIC = {"criteria": [{"name": "correct", "kind": "exact_match", "weight": 1.0, "params": {}}]}
ROWS = [{"prompt": "What is 2+2?", "answer": "4"}, {"prompt": "Capital of France?", "answer": "Paris"}]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def model_folder(folder: Path) -> Path:
    """A folder that passes the studio's model folder check (a config.json; it reads no weights).
    Model and checkpoint folders under the data folder are checked, so tests that name one make it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    return folder


class StudioTestCase(APITestCase):
    def setUp(self) -> None:
        super().setUp()
        # Laid out like a checkout: the data folder inside the one datasets may be registered from.
        self.tmp = Path(tempfile.mkdtemp(prefix="studio-test-")).resolve()
        self.data_dir = self.tmp / "var"
        self.data_dir.mkdir()
        self.settings_override = override_settings(DATA_DIR=self.data_dir, DATASET_ROOTS=[self.tmp])
        self.settings_override.enable()
        self.addCleanup(self.settings_override.disable)
        for name, user in people.everyone().items():
            setattr(self, name, user)
        self.team = Team.objects.get(name=people.TEAM)
        self.other_team = Team.objects.get(name=people.OTHER_TEAM)
        self.dataset = self.make_dataset()
        self.rubric = Rubric.objects.create(team=self.team, name="Correct", spec=RUBRIC, created_by=self.alice)
        self.experiment = Experiment.objects.create(
            team=self.team, name="Exp", dataset=self.dataset, rubric=self.rubric, model_path="/models/tiny",
            config={"optim": {"total_steps": 5}}, created_by=self.alice,
        )  # fmt: skip

    def make_dataset(self, rows=ROWS, name="qa.jsonl", team=None, **mapping) -> Dataset:
        path = write_jsonl(self.tmp / name, rows)
        dataset = Dataset(team=team or self.team, name=name, source="server_file", path=str(path), format="jsonl",
                          **mapping)  # fmt: skip
        storage.refresh(dataset)
        dataset.save()
        return dataset

    def make_run(self, state: str = "queued", **fields) -> Run:
        spec = self.experiment.spec_config()
        return Run.objects.create(**{"team": self.team, "experiment": self.experiment, "name": "run", "spec": spec,
                                     "state": state, **fields})  # fmt: skip

    def client_for(self, user) -> APIClient:
        client = APIClient()
        client.force_authenticate(user)
        return client
