"""'Try it' for environments, the worker's side: real episodes with the tiny model, first called
in this process (workers.trying, with the tests' countdown kind), then through a real Celery
worker on the embedded Redis, as the web tier sends it (with the built-in `tools` kind and its
calculator: the worker process knows only the kinds the trainer library registers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.processes import Children, start_embedded_redis
from launcher.studio import worker_argv
from tests.migrated import migrate
from tests.passes import first_pass_only
from tests.studio.environment_kind import CONFIG
from tests.studio.rubrics.test_try_timeout import worker_online
from trainers.rollout.environments.kinds import ENVIRONMENTS

ROOT = Path(__file__).resolve().parents[3]
pytestmark = first_pass_only  # its worker's studio is a SQLite file and a Redis of its own
TURN_KEYS = {"text", "num_tokens", "finish_reason", "tool_calls", "observation", "observation_tokens", "reward",
             "reason", "advantage", "answered"}  # fmt: skip
CALCULATOR = {"kind": "tools", "params": {"tools": [{"kind": "calculator"}]}, "max_turns": 2, "max_turn_tokens": 12}
# The web tier's side, in a process configured for the worker's Redis and database.
TRY_IT = """
import json, sys, django
django.setup()
from studio.environments.trying import TryError, try_environment
config, model = json.loads(sys.argv[1]), {"model_path": sys.argv[2], "checkpoint": None}
try:
    print(json.dumps(try_environment(config, model, [{"prompt": "What is 6*7?", "answer": "42"}], 2, timeout_s=120)))
except TryError as exc:
    print(json.dumps({"status": exc.status, "errors": exc.errors}))
"""


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from trainers.demos.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


def test_the_worker_runs_episodes_and_returns_each_turn_with_its_observation(tiny_model):
    from workers.trying import try_episodes

    stages: list[str] = []
    model = {"model_path": str(tiny_model), "checkpoint": None}
    answer = try_episodes(CONFIG, model, [{"prompt": "Count down from 3", "answer": "stop"}], 2, stages.append)
    assert stages == ["loading the model", "running episodes"]
    [group] = answer["episodes"]
    assert len(group) == 2
    for episode in group:
        assert episode["messages"][-1] == {"role": "user", "content": "Count down from 3"}
        assert 1 <= len(episode["turns"]) <= 3 and episode["error"] is None
        assert all(set(turn) == TURN_KEYS for turn in episode["turns"])
        assert all(0 < turn["num_tokens"] <= 256 for turn in episode["turns"])
        said = [turn for turn in episode["turns"] if "stop" in turn["text"]]
        if not said:  # the tiny model never says the word: the countdown answers each turn, then ends
            assert [t["observation"] for t in episode["turns"]][:2] == [[{"role": "user", "content": "2"}],
                                                                        [{"role": "user", "content": "1"}]]  # fmt: skip
            assert episode["turns"][1]["observation_tokens"] > 0
        assert episode["final_text"] == episode["turns"][-1]["text"]


@pytest.mark.timeout(300)
@pytest.mark.skipif("tools" not in ENVIRONMENTS, reason="needs the built-in tools kind (branch agent-tools)")
def test_try_it_through_a_real_worker_returns_the_episodes(tiny_model, tmp_path):
    children = Children()
    redis_url = start_embedded_redis(children, tmp_path)
    db = tmp_path / "studio.sqlite3"
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="studio.settings", STUDIO_DATA_DIR=str(tmp_path),
               DATABASE_URL=f"sqlite:///{db}", REDIS_URL=redis_url, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")  # fmt: skip
    log = tmp_path / "worker.log"
    worker = None
    try:
        migrate(env)
        worker = subprocess.Popen(worker_argv("default", 1, "default-test@%h"), cwd=ROOT, env=env,
                                  stdout=log.open("w"), stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 60
        while not worker_online(db):
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        out = subprocess.run([sys.executable, "-c", TRY_IT, json.dumps(CALCULATOR), str(tiny_model)], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=200)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        answer = json.loads(out.stdout.strip().splitlines()[-1])
        assert "episodes" in answer, (answer, log.read_text()[-3000:])
        [group] = answer["episodes"]
        assert len(group) == 2
        system = group[0]["messages"][0]
        assert system["role"] == "system" and "calculator" in system["content"]  # the tools kind listed its tool
        assert all(set(turn) == TURN_KEYS for episode in group for turn in episode["turns"])
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(30)
        children.stop_all()
