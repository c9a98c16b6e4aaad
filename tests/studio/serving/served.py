"""A real studio with a Celery worker that serves models, for the serving tests: two teams, a run of
each with an agent checkpoint (a tiny model cold-started to call the calculator), team API tokens.

The checkpoints lie where a run's do (DATA_DIR/runs/<id>/step-<n>), the base model in the demo
folder: the path policy lets each team load only its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

from launcher.processes import ROOT
from tests.browser.live_studio import LiveStudio

PASSWORD = "serving-pass-1"
CALCULATOR_QUESTION = "What is 2+2?"

# The tiny agent model cold-started on one episode of the calculator tools environment (hermes calls
# only, the environment's default intro): asked 2+2 with the calculator offered, it calls it.
CALCULATOR_MODEL = """
import sys
from pathlib import Path
import torch
from trainers.demos.agent_demo import build_agent_model
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds.tools import ToolsEnvironment
from trainers.run.sft import cold_start

torch.set_num_threads(2)
out = Path(sys.argv[1])
env = ToolsEnvironment.create({"tools": [{"kind": "calculator"}], "formats": ["hermes"]}, EpisodeLimits())
start = env.reset({"messages": [{"role": "user", "content": sys.argv[2]}]})
call = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>'
result = env.step(call)
conversation = [*start.messages, {"role": "assistant", "content": call}, *result.observation,
                {"role": "assistant", "content": "4"}]
cold_start(build_agent_model(out / "base"), [conversation], out / "warm", steps=80, lr=3e-3, batch_size=2,
           device="cpu")
"""

RECORDS = """
import json, sys
from django.contrib.auth import get_user_model
from studio.accounts.models import OWNER, VIEWER, Team
from studio.runs.models import Checkpoint, Run
from studio.serving import tokens
users = {n: get_user_model().objects.create_user(n, password=%(password)r) for n in ("ana", "ben", "vic")}
teams = {n: Team.objects.create(name=n) for n in ("Ana's lab", "Ben's lab")}
teams["Ana's lab"].add_member(users["ana"], OWNER)
teams["Ana's lab"].add_member(users["vic"], VIEWER)
teams["Ben's lab"].add_member(users["ben"], OWNER)
out = {"keys": {}, "runs": {}}
for name, team in teams.items():
    run = Run.objects.create(team=team, name=f"{name} agent", state="succeeded", kind="train",
                             spec={"model": {"path": %(base)r}})
    out["runs"][name] = run.pk
out["keys"]["ana"] = tokens.create(teams["Ana's lab"], "all", ["models:read", "inference"])[1]
out["keys"]["ana_read"] = tokens.create(teams["Ana's lab"], "list only", ["models:read"])[1]
out["keys"]["ben"] = tokens.create(teams["Ben's lab"], "all", ["models:read", "inference"])[1]
print(json.dumps(out), file=open(%(answer)r, "w"))
"""

CHECKPOINTS = """
from studio.runs.models import Checkpoint
for run_id, path in %r:
    Checkpoint.objects.create(run_id=run_id, step=4, path=path)
"""


def start_serving_studio(folder: Path, models: Path, **env: str) -> tuple[LiveStudio, dict]:
    """(the started studio with a worker, its records: {"keys": {...}, "runs": {team: id}})."""
    settings = {"STUDIO_SERVING_ENGINE": "transformers", "STUDIO_SERVING_START_TIMEOUT_S": "120", **env}
    with mock.patch.dict(os.environ, settings):
        studio = LiveStudio(folder).start(worker=True)
    try:
        base = folder / "demo" / "agent-base"
        shutil.copytree(models / "base", base)
        answer = folder / "records.json"
        studio.shell(RECORDS % {"password": PASSWORD, "base": str(base), "answer": str(answer)})
        records = json.loads(answer.read_text())
        placed = []
        for run_id in records["runs"].values():
            checkpoint = folder / "runs" / str(run_id) / "step-4"
            shutil.copytree(models / "warm", checkpoint)
            placed.append((run_id, str(checkpoint)))
        studio.shell(CHECKPOINTS % placed)
    except BaseException:
        studio.stop()
        raise
    return studio, records


def build_calculator_model(out: Path) -> Path:
    """The folder holding base/ (the tiny agent model) and warm/ (it cold-started to call the calculator)."""
    subprocess.run([sys.executable, "-c", CALCULATOR_MODEL, str(out), CALCULATOR_QUESTION], cwd=ROOT, check=True)
    return out


def build_tiny_models(out: Path) -> Path:
    """base/ (the tiny agent model, untrained: it writes on) and warm/ (a copy, as a checkpoint of it)."""
    from trainers.demos.agent_demo import build_agent_model

    build_agent_model(out / "base")
    shutil.copytree(out / "base", out / "warm")
    return out
