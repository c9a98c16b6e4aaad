"""First start: a user, a team and a demo (dataset, rubric, tiny model, experiment) if none exist,
and the real-model demos beside it once the real model is installed: sums answered with the number,
and an agent that calls the calculator (its environment too).

The tiny model is built, and the real model converted, in a child Python process so the launcher
(and the web tier) never import torch. The real model (trainers.models.pretrained.SMOLLM2) is converted by
`./studioctl setup` (`manage.py real_model`), not on start: a start only looks for its folder.
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
from studio.datasets import places
from studio.datasets.files import inspect_dataset
from studio.datasets.models import Dataset
from studio.environments.configs import validate_environment
from studio.environments.models import Environment
from studio.experiments.models import Experiment, data_options
from studio.rubrics.models import Rubric
from trainers.demos import real, real_agent
from trainers.models.pretrained import SMOLLM2, is_installed
from trainers.rollout.engines.availability import vllm_unavailable_reason

DEMO_TEAM = "Demo team"
TINY_EXPERIMENT_NAME = "Demo: tiny model repeats a letter"
# The demos in the order a newcomer tries them, each with what it shows: the home page lists them so,
# and README's "Two commands" names them in this order (tests/studio/accounts/test_home_demos.py).
DEMOS = (
    (real.EXPERIMENT_NAME, "a real pretrained model (135 M parameters): its held-out curves (val/) show its learning"),
    (real_agent.EXPERIMENT_NAME, "the same model with a calculator tool: the inspector shows each call and its result"),
    (TINY_EXPERIMENT_NAME, "a ~1 M-parameter model with random weights: its reward rises within a minute on a CPU"),
)
ADMIN = "admin"
TINY_MODEL_LABEL = "tiny demo model, ~1 M parameters, random weights"


def demo_model_path() -> Path:
    """Where the first start builds the demo's tiny model (in the folder every team may read)."""
    return places.demo_dir() / "tiny-model"


def real_model_path() -> Path:
    """Where `./studioctl setup` converts the real model, beside the tiny one."""
    return places.demo_dir() / SMOLLM2.name


def calculator_transcripts_path() -> Path:
    """The agent demo's cold-start conversations (real_agent.make_warm_up_file), written on the first start:
    the experiment form offers them for any agent with the calculator."""
    return places.demo_dir() / "calculator-cold-start.jsonl"


def real_model_installed() -> bool:
    """The real model's folder holds a finished conversion (reads one small file; no torch)."""
    return is_installed(SMOLLM2, real_model_path())


def bootstrap() -> tuple[str, str, Path] | None:
    """Create what is missing; returns (username, password, file) when a user was created.
    Each real-model demo is added to the demo team whenever the real model is installed and the team
    has no experiment of that name (so an install after the first start brings them too)."""
    login = _first_user()
    user = get_user_model().objects.order_by("pk").first()
    if not Team.objects.exists():
        Team.objects.create(name=DEMO_TEAM).add_member(user, OWNER)
    team = Team.objects.filter(name=DEMO_TEAM).order_by("pk").first() or Team.objects.order_by("pk").first()
    if not Experiment.objects.exists():
        make_demo(team, user)
    if real_model_installed() and not team.experiments.filter(name=real.EXPERIMENT_NAME).exists():
        make_real_demo(team, user)
    if real_model_installed() and not team.experiments.filter(name=real_agent.EXPERIMENT_NAME).exists():
        make_agent_demo(team, user)
    return login


def first_login_path() -> Path:
    """Where the first start keeps the first login (the sign-in page names it): in the data folder."""
    return Path(settings.DATA_DIR) / "first-login.txt"


def _first_user() -> tuple[str, str, Path] | None:
    users = get_user_model().objects
    if users.exists():
        return None
    password = os.environ.get("STUDIO_ADMIN_PASSWORD") or secrets.token_urlsafe(9)
    users.create_superuser(ADMIN, "", password)
    path = first_login_path()
    path.write_text(f"username: {ADMIN}\npassword: {password}\n")
    path.chmod(0o600)
    return ADMIN, password, path


def quiet_env() -> dict[str, str]:
    """The environment of a child that builds or converts a model: third-party progress bars (tqdm's, as
    the GGUF reader's) off, so the first start prints our own lines only."""
    return {**os.environ, "TQDM_DISABLE": "1"}


def build_tiny_model(out_dir: Path) -> Path:
    """trainers.demos.tiny.build_tiny_model in a child process (it imports torch)."""
    if not (out_dir / "config.json").exists():
        code = "import sys; from trainers.demos.tiny import build_tiny_model; build_tiny_model(sys.argv[1])"
        subprocess.run([sys.executable, "-c", code, str(out_dir)], check=True, cwd=settings.BASE_DIR, env=quiet_env())
    return out_dir


def install_real_model(warn=print) -> Path | None:
    """The real model converted into the demo folder once (`python -m trainers pretrained` in a child
    process: the conversion imports torch); its progress lines go to this process's output. Where it
    cannot be done, `warn` gets why in two lines and None comes back."""
    folder = real_model_path()
    if real_model_installed():
        return folder
    command = [sys.executable, "-m", "trainers", "pretrained", SMOLLM2.name, "--into", str(folder.parent)]
    done = subprocess.run(command, cwd=settings.BASE_DIR, stderr=subprocess.PIPE, text=True, env=quiet_env())
    if done.returncode == 0 and real_model_installed():
        return folder
    lines = [line.strip() for line in (done.stderr or "").splitlines() if line.strip()]
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    reason = (errors or lines or [f"the conversion exited with status {done.returncode}"])[-1]
    warn(f"the real model ({SMOLLM2.title}) is not installed: {reason}")
    warn("  the studio runs as before, with the tiny demo model; ./studioctl setup tries again")
    return None


def make_demo(team: Team, user) -> Experiment:
    from trainers.demos.demo import demo_spec, make_demo_dataset

    demo_dir = places.demo_dir()  # the one part of DATA_DIR that every team may read
    model = build_tiny_model(demo_model_path())
    data_path = make_demo_dataset(demo_dir / "repeat-the-letter.jsonl")
    spec = demo_spec(model, data_path, demo_dir / "out")
    return _create_demo(
        team, user, spec, data_path,
        dataset=("Repeat the letter", "Demo prompts: 'Repeat the letter: c' -> c."),
        rubric=("Letter fraction", "Fraction of the completion's characters that are the requested letter."),
        experiment=(TINY_EXPERIMENT_NAME,
                    "A ~1M-parameter model learns the toy task on a CPU in about a minute."),
    )  # fmt: skip


def make_real_demo(team: Team, user) -> Experiment:
    """The real model (installed by setup) learns to answer sums with the number alone (trainers.demos.real)."""
    demo_dir = places.demo_dir()
    data_path = real.make_real_dataset(demo_dir / "small-sums.jsonl")
    spec = real.real_demo_spec(real_model_path(), data_path, demo_dir / "out")
    return _create_demo(
        team, user, spec, data_path,
        dataset=(real.DATASET_NAME, real.DATASET_DESCRIPTION),
        rubric=(real.RUBRIC_NAME, real.RUBRIC_DESCRIPTION),
        experiment=(real.EXPERIMENT_NAME, real.EXPERIMENT_DESCRIPTION),
    )  # fmt: skip


def make_agent_demo(team: Team, user) -> Experiment:
    """The real model as a calculator agent (trainers.demos.real_agent): its dataset, rubric, `tools`
    environment with the calculator, and an experiment whose runs begin with the cold start (warm_up) on
    calculator transcripts, so the inspector shows tool calls and their results from the first step."""
    demo_dir = places.demo_dir()
    data_path = real_agent.make_real_agent_dataset(demo_dir / "calculator-arithmetic.jsonl")
    warm_up = real_agent.make_warm_up_file(calculator_transcripts_path())
    fast = vllm_unavailable_reason() is None  # vLLM samples the demo several times faster (real_agent.FAST_SAMPLING)
    spec = real_agent.real_agent_demo_spec(real_model_path(), data_path, warm_up, demo_dir / "out", fast_sampling=fast)
    return _create_demo(
        team, user, spec, data_path,
        dataset=(real_agent.DATASET_NAME, real_agent.DATASET_DESCRIPTION),
        rubric=(real_agent.RUBRIC_NAME, real_agent.RUBRIC_DESCRIPTION),
        experiment=(real_agent.EXPERIMENT_NAME, real_agent.EXPERIMENT_DESCRIPTION),
        environment=(real_agent.ENVIRONMENT_NAME, real_agent.ENVIRONMENT_DESCRIPTION),
    )  # fmt: skip


def _create_demo(team: Team, user, spec: dict, data_path: Path, *, dataset: tuple[str, str],
                 rubric: tuple[str, str], experiment: tuple[str, str],
                 environment: tuple[str, str] | None = None) -> Experiment:  # fmt: skip
    """A demo's dataset (inspected like an upload), rubric, environment (when given and the spec has one)
    and experiment, from its RunSpec config; each (name, description). The experiment keeps the spec's data
    options (a system prompt, limits) but not the dataset's mapping, which the dataset row holds; its
    environment is the environment row's (version 1)."""
    report = inspect_dataset(data_path, "jsonl", prompt_field="prompt", answer_field="answer")
    with transaction.atomic():
        dataset_row = Dataset.objects.create(
            team=team, name=dataset[0], description=dataset[1],
            source="server_file", path=str(data_path), format="jsonl", prompt_field="prompt", answer_field="answer",
            columns=report.columns, row_count=report.row_count, size_bytes=data_path.stat().st_size,
            errors=report.errors, error_count=report.error_count, created_by=user,
        )  # fmt: skip
        rubric_row = Rubric.objects.create(
            team=team, name=rubric[0], spec=spec["rubric"], created_by=user, description=rubric[1],
        )  # fmt: skip
        environment_row = None
        if environment is not None and spec.get("environment"):
            environment_row = Environment.objects.create(
                team=team, name=environment[0], description=environment[1],
                config=validate_environment(spec["environment"]), version=1, created_by=user,
            )  # fmt: skip
            environment_row.record_version(user)
        config = {k: v for k, v in spec.items() if k not in ("name", "data", "rubric", "checkpoint", "environment")}
        config["model"] = {k: v for k, v in spec["model"].items() if k != "path"}
        if options := data_options(spec["data"]):
            config["data"] = options
        return Experiment.objects.create(
            team=team, name=experiment[0], dataset=dataset_row, rubric=rubric_row,
            environment=environment_row, environment_version=environment_row.version if environment_row else None,
            model_path=spec["model"]["path"], preset=spec["algorithm"].get("preset", "grpo"), config=config,
            created_by=user, description=experiment[1],
        )  # fmt: skip
