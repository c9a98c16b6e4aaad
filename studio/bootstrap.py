"""First start: a user, a team and a demo (dataset, rubric, tiny model, experiment) if none exist.

The tiny model is built in a child Python process so the launcher (and the web tier)
never import torch.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from studio.accounts.models import OWNER, Team
from studio.datasets import storage
from studio.datasets.files import inspect_dataset
from studio.datasets.models import Dataset
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric

DEMO_TEAM = "Demo team"
ADMIN = "admin"


def demo_model_path() -> Path:
    """Where the first start builds the demo's tiny model (in the folder every team may read)."""
    return storage.demo_dir() / "tiny-model"


def bootstrap() -> tuple[str, str, Path] | None:
    """Create what is missing; returns (username, password, file) when a user was created."""
    login = _first_user()
    user = get_user_model().objects.order_by("pk").first()
    if not Team.objects.exists():
        Team.objects.create(name=DEMO_TEAM).add_member(user, OWNER)
    if not Experiment.objects.exists():
        make_demo(Team.objects.order_by("pk").first(), user)
    return login


def _first_user() -> tuple[str, str, Path] | None:
    users = get_user_model().objects
    if users.exists():
        return None
    password = os.environ.get("STUDIO_ADMIN_PASSWORD") or secrets.token_urlsafe(9)
    users.create_superuser(ADMIN, "", password)
    path = settings.DATA_DIR / "first-login.txt"
    path.write_text(f"username: {ADMIN}\npassword: {password}\n")
    path.chmod(0o600)
    return ADMIN, password, path


def build_tiny_model(out_dir: Path) -> Path:
    """trainers.demos.tiny.build_tiny_model in a child process (it imports torch)."""
    if not (out_dir / "config.json").exists():
        code = "import sys; from trainers.demos.tiny import build_tiny_model; build_tiny_model(sys.argv[1])"
        subprocess.run([sys.executable, "-c", code, str(out_dir)], check=True, cwd=settings.BASE_DIR)
    return out_dir


def make_demo(team: Team, user) -> Experiment:
    from trainers.demos.demo import demo_spec, make_demo_dataset

    demo_dir = storage.demo_dir()  # the one part of DATA_DIR that every team may read
    model = build_tiny_model(demo_model_path())
    data_path = make_demo_dataset(demo_dir / "repeat-the-letter.jsonl")
    spec = demo_spec(model, data_path, demo_dir / "out")
    report = inspect_dataset(data_path, "jsonl", prompt_field="prompt", answer_field="answer")
    with transaction.atomic():
        dataset = Dataset.objects.create(
            team=team, name="Repeat the letter", description="Demo prompts: 'Repeat the letter: c' -> c.",
            source="server_file", path=str(data_path), format="jsonl", prompt_field="prompt", answer_field="answer",
            columns=report.columns, row_count=report.row_count, size_bytes=data_path.stat().st_size,
            errors=report.errors, error_count=report.error_count, created_by=user,
        )  # fmt: skip
        rubric = Rubric.objects.create(
            team=team, name="Letter fraction", spec=spec["rubric"], created_by=user,
            description="Fraction of the completion's characters that are the requested letter.",
        )  # fmt: skip
        config = {k: v for k, v in spec.items() if k not in ("name", "data", "rubric", "checkpoint")}
        config["model"] = {k: v for k, v in spec["model"].items() if k != "path"}
        return Experiment.objects.create(
            team=team, name="Demo: tiny model repeats a letter", dataset=dataset, rubric=rubric,
            model_path=str(model), preset="grpo", config=config, created_by=user,
            description="A ~1M-parameter model learns the toy task on a CPU in about a minute.",
        )  # fmt: skip
