"""Mirroring a run to Trackio, W&B and MLflow (workers.mirroring, studio.tracking), against real local
instances: Trackio's local store (its SQLite file), W&B in offline mode (the run's .wandb records and
table files, read back with tests/workers/wandb_files.py) and an MLflow tracking server this module
starts on localhost (read back with MlflowClient). And: a tracker that is down slows nothing and shows
on the run's mirror status; the secrets never reach the environment a child process inherits.

The "training" here is a loop that reports as the trainer does (metrics, then the step's rollouts)
through the mirror's reporter around an in-memory reporter: the seam under test is the Reporter, and
a real trainer would add only time."""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.test import override_settings

from studio.tracking import services
from studio.tracking.models import MirrorStatus, TrackerSecret
from tests.studio import people
from tests.workers import wandb_files
from trainers.report import CriterionScore, MemoryReporter, Rollout
from workers import mirroring
from workers.mirroring import rows

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = 3
WANDB_KEY = "wandb-key-0123456789abcdef0123456789abcdef"  # never valid anywhere: offline mode sends nothing


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def mlflow_process(tmp_path_factory):
    """A real MLflow tracking server (SQLite backend, proxied artifacts), started once as the module
    begins: it takes tens of seconds to create its tables, while the Trackio and W&B tests run."""
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    # An http artifact location (another server than the tracking one) is allowed, as a server's operator may.
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_ALLOWED_HOST_ADDRESSED_ARTIFACT_SCHEMES": "http"}
    with open(root / "server.log", "wb") as out:
        proc = subprocess.Popen(
            [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--artifacts-destination",
             str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    yield proc, f"http://127.0.0.1:{port}", root
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # a server still draining connections on a busy machine: stopped outright
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.fixture
def mlflow_server(mlflow_process):
    """The server's URL once it answers /health."""
    proc, url, root = mlflow_process
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the MLflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
        time.sleep(0.3)


@pytest.fixture
def trackio_dir(tmp_path, monkeypatch):
    """Trackio's local store in a folder of the test: Trackio reads TRACKIO_DIR once, at import, into
    several modules' globals, so each is pointed at the folder."""
    import trackio  # noqa: F401 - loads every module that holds the folder

    folder = tmp_path / "trackio"
    folder.mkdir()
    for name, module in list(sys.modules.items()):
        if name.startswith("trackio") and hasattr(module, "TRACKIO_DIR"):
            monkeypatch.setattr(module, "TRACKIO_DIR", folder)
        if name.startswith("trackio") and hasattr(module, "MEDIA_DIR"):
            monkeypatch.setattr(module, "MEDIA_DIR", folder / "media")
    return folder


@pytest.fixture
def world(tmp_path):
    team = people.the_team()
    alice = people.person("alice")
    from studio.runs.models import Run

    spec = {"algorithm": {"kl_coef": 0.05, "advantage_estimator": "grpo"}, "optim": {"lr": 1e-6, "total_steps": STEPS}}
    run = Run.objects.create(team=team, name="grpo-tiny", spec=spec, created_by=alice, total_steps=STEPS)
    with override_settings(DATA_DIR=tmp_path / "var", DATASET_ROOTS=[tmp_path]):
        yield team, run


def rollouts_of(step: int) -> list[Rollout]:
    """Two prompts x two samples; rewards and advantages that a test can recompute."""
    out = []
    for group, prompt in enumerate(["What is 2+2?", "Capital of France?"]):
        for sample in range(2):
            correct = float(sample == 0)
            out.append(Rollout(
                step=step, prompt_id=f"p{group}", sample_index=sample, prompt=prompt,
                completion=f"answer {step}.{group}.{sample}", reward=correct + 0.1 * step,
                scores={"correct": CriterionScore(correct), "short": CriterionScore(0.5)},
                advantage=1.0 if sample == 0 else -1.0, num_tokens=3 + sample,
            ))  # fmt: skip
    return out


def metrics_of(step: int) -> dict[str, float]:
    return {"reward/mean": 0.5 + 0.1 * step, "actor/loss": 1.0 / step}


def train(reporter, steps: int = STEPS, work_s: float = 0.0) -> float:
    """Report like the trainer does; returns the loop's seconds."""
    start = time.perf_counter()
    for step in range(1, steps + 1):
        time.sleep(work_s)
        reporter.metrics(step, metrics_of(step))
        reporter.rollouts(step, rollouts_of(step))
    return time.perf_counter() - start


def mirror_run(run, settings: dict, steps: int = STEPS, work_s: float = 0.0, close_s: float = 60.0):
    services.save_team_defaults(run.team, settings)
    mirror = mirroring.start(run)
    assert mirror is not None
    memory = MemoryReporter()
    took = train(mirror.wrap(memory), steps, work_s)
    mirror.close("succeeded", timeout_s=close_s)
    return memory, took


def status(run, tracker: str) -> MirrorStatus:
    return MirrorStatus.objects.get(run=run, tracker=tracker)


# --- what is sent -----------------------------------------------------------------------------


def test_a_steps_sample_takes_the_first_sample_of_every_group_first():
    chosen = rows.sample(rollouts_of(1), 3)
    assert [(r.prompt_id, r.sample_index) for r in chosen] == [("p0", 0), ("p1", 0), ("p0", 1)]
    row = rows.row(chosen[1], max_chars=100)
    assert row["prompt"] == "Capital of France?" and row["completion"] == "answer 1.1.0"
    assert row["reward"] == pytest.approx(1.1) and row["advantage"] == 1.0
    assert row["score/correct"] == 1.0 and row["score/short"] == 0.5
    assert rows.cut("x" * 10, 5) == "xxxx…"
    assert rows.flat_settings({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": "1", "a.c": "[1, 2]", "d": ""}


def test_trackio_gets_the_metrics_settings_and_rollouts_as_traces(world, trackio_dir):
    from trackio.sqlite_storage import SQLiteStorage

    team, run = world
    memory, _ = mirror_run(run, {"trackio": {"enabled": True, "project": "studio-test"}, "rollouts_per_step": 3})
    assert len(memory.metric_points) == STEPS  # the studio's reporter got everything first

    assert status(run, "trackio").state == "done", status(run, "trackio").last_error
    assert status(run, "trackio").steps_sent == STEPS and status(run, "trackio").rollouts_sent == 3 * STEPS
    name = f"grpo-tiny-{run.pk}"
    logs = [entry for entry in SQLiteStorage.get_logs("studio-test", name) if "reward/mean" in entry]
    assert [e["step"] for e in logs] == [1, 2, 3]
    assert [e["reward/mean"] for e in logs] == pytest.approx([0.6, 0.7, 0.8])
    assert [e["actor/loss"] for e in logs] == pytest.approx([1.0, 0.5, 1 / 3])
    config = SQLiteStorage.get_run_config("studio-test", name)
    assert config["spec"]["algorithm"]["kl_coef"] == 0.05 and config["studio"]["run_id"] == run.pk
    traces = SQLiteStorage.get_traces("studio-test", name)
    assert len(traces) == 3 * STEPS
    step2 = sorted(
        (t for t in traces if t["step"] == 2), key=lambda t: (t["metadata"]["sample_index"], t["metadata"]["prompt_id"])
    )
    assert [(t["metadata"]["prompt_id"], t["metadata"]["sample_index"]) for t in step2] == [
        ("p0", 0),
        ("p1", 0),
        ("p0", 1),
    ]
    first = step2[0]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert first["messages"][0]["content"] == "What is 2+2?" and first["messages"][1]["content"] == "answer 2.0.0"
    assert first["metadata"]["reward"] == pytest.approx(1.2) and first["metadata"]["advantage"] == 1.0
    assert first["metadata"]["scores"] == {"correct": 1.0, "short": 0.5}


def test_wandb_offline_gets_history_config_and_a_rollout_table_per_step(world):
    team, run = world
    services.set_secret(team, "wb", "wandb", WANDB_KEY)
    settings = {"wandb": {"enabled": True, "mode": "offline", "project": "studio-test", "api_key_secret": "wb"},
                "rollouts_per_step": 2}  # fmt: skip
    mirror_run(run, settings)

    st = status(run, "wandb")
    assert st.state == "done", st.last_error
    assert (st.steps_sent, st.rollouts_sent) == (STEPS, 2 * STEPS)
    folder = Path(run_folder(run)) / "mirrors" / "wandb"
    [log] = glob.glob(str(folder / "wandb" / "offline-run-*" / "run-*.wandb"))
    # W&B's own service process writes the offline file; on a loaded machine its last records can land after
    # the run's close returned (seen once in a full suite: no history yet). Wait for them, within a bound.
    deadline = time.monotonic() + 30
    while True:
        history = [h for h in wandb_files.history(Path(log)) if "reward/mean" in h or "rollouts/path" in h]
        by_step = {}
        for h in history:
            by_step.setdefault(h["_step"], {}).update(h)
        if sorted(by_step) == [1, 2, 3] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(by_step) == [1, 2, 3]
    assert [by_step[s]["reward/mean"] for s in (1, 2, 3)] == pytest.approx([0.6, 0.7, 0.8])
    config = wandb_files.config(Path(log))
    assert config["spec"]["optim"]["lr"] == 1e-6 and config["studio"]["run"] == "grpo-tiny"
    table = json.loads((Path(log).parent / "files" / by_step[3]["rollouts/path"]).read_text())
    assert table["columns"][:8] == [
        "step",
        "split",
        "prompt_id",
        "sample_index",
        "prompt",
        "completion",
        "reward",
        "advantage",
    ]
    got = [dict(zip(table["columns"], r, strict=True)) for r in table["data"]]
    assert [(r["prompt_id"], r["sample_index"], r["completion"]) for r in got] == [
        ("p0", 0, "answer 3.0.0"),
        ("p1", 0, "answer 3.1.0"),
    ]
    assert got[1]["reward"] == pytest.approx(1.3) and got[1]["score/correct"] == 1.0 and got[1]["score/short"] == 0.5
    # The key went to the client in memory: no file of the run holds it.
    for path in folder.rglob("*"):
        if path.is_file():
            assert WANDB_KEY.encode() not in path.read_bytes(), path


def run_folder(run) -> str:
    from django.conf import settings

    return str(Path(settings.DATA_DIR) / "runs" / str(run.pk))


def test_mlflow_gets_metrics_params_and_rollout_tables(world, mlflow_server):
    from mlflow import MlflowClient

    team, run = world
    settings = {
        "mlflow": {"enabled": True, "tracking_uri": mlflow_server, "experiment": "studio-test"},
        "rollouts_per_step": 4,
    }
    mirror_run(run, settings)

    st = status(run, "mlflow")
    assert st.state == "done", st.last_error
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("studio-test")
    [found] = client.search_runs([experiment.experiment_id], f"tags.`studio.run_id` = '{run.pk}'")
    assert found.info.status == "FINISHED" and found.info.run_name == f"grpo-tiny-{run.pk}"
    history = client.get_metric_history(found.info.run_id, "reward/mean")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
        (1, pytest.approx(0.6)),
        (2, pytest.approx(0.7)),
        (3, pytest.approx(0.8)),
    ]
    assert found.data.params["spec.algorithm.kl_coef"] == "0.05" and found.data.params["studio.run_id"] == str(run.pk)
    files = {f.path for f in client.list_artifacts(found.info.run_id, "rollouts")}
    assert files == {f"rollouts/step_00000{s}.json" for s in (1, 2, 3)}
    saved = json.loads(Path(client.download_artifacts(found.info.run_id, "rollouts/step_000002.json")).read_text())
    table = [dict(zip(saved["columns"], r, strict=True)) for r in saved["data"]]
    assert [r["completion"] for r in table] == ["answer 2.0.0", "answer 2.1.0", "answer 2.0.1", "answer 2.1.1"]
    assert [r["advantage"] for r in table] == [1.0, 1.0, -1.0, -1.0]
    assert [r["score/correct"] for r in table] == [1.0, 1.0, 0.0, 0.0]
    assert [r["reward"] for r in table] == pytest.approx([1.2, 1.2, 0.2, 0.2])
    spec = json.loads(Path(client.download_artifacts(found.info.run_id, "settings/run_spec.json")).read_text())
    assert spec["spec"]["optim"]["total_steps"] == STEPS


# --- a tracker that is down ----------------------------------------------------------------------


def test_a_tracker_that_is_down_slows_nothing_and_shows_on_the_run(world):
    team, run = world
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    steps, work_s = 20, 0.01
    alone = train(MemoryReporter(), steps, work_s)
    settings = {"mlflow": {"enabled": True, "tracking_uri": closed, "experiment": "down"}}
    memory, mirrored = mirror_run(run, settings, steps=steps, work_s=work_s, close_s=30)

    # The loop's time with the mirror is the loop's time without it (the reports only go into a queue).
    print(
        f"\nstep loop, {steps} steps of {work_s * 1000:.0f} ms: alone {alone:.3f} s, mirrored to a down MLflow {mirrored:.3f} s"
    )
    assert mirrored < alone + 0.1
    assert len(memory.metric_points) == steps and len(memory.rollout_batches) == steps  # the studio lost nothing
    st = status(run, "mlflow")
    assert st.state == "failed" and st.failures >= 1 and st.steps_sent == 0
    assert "could not start" in st.last_error and "Connection" in st.last_error, st.last_error
    assert st.dropped == 2 * steps  # every report of the run, left out for this tracker only


def test_settings_that_no_longer_hold_show_on_the_run_and_mirror_nothing(world):
    team, run = world
    services.set_secret(team, "gone", "wandb", WANDB_KEY)
    services.save_team_defaults(team, {"wandb": {"enabled": True, "api_key_secret": "gone"}})
    TrackerSecret.objects.filter(name="gone").delete()
    assert mirroring.start(run) is None
    st = status(run, "wandb")
    assert st.state == "failed" and "no wandb secret named 'gone'" in st.last_error


# --- secrets -------------------------------------------------------------------------------------


def test_secrets_are_stored_encrypted_and_reach_no_environment(world, trackio_dir):
    team, run = world
    secret = services.set_secret(team, "wb", "wandb", WANDB_KEY)
    assert WANDB_KEY.encode() not in bytes(secret.ciphertext)
    assert services.secret_value(team.pk, "wb") == WANDB_KEY
    settings = {"wandb": {"enabled": True, "mode": "offline", "api_key_secret": "wb"}, "trackio": {"enabled": True}}
    mirror_run(run, settings)
    assert status(run, "wandb").state == "done"
    assert all(WANDB_KEY not in v for v in os.environ.values())
    child = subprocess.run(["env"], capture_output=True, text=True, check=True).stdout  # what a child inherits
    assert WANDB_KEY not in child


# --- through the worker ----------------------------------------------------------------------------


def test_a_real_training_run_on_the_worker_mirrors_what_the_trainer_reports(world, trackio_dir, tmp_path):
    """execute_run with the real tiny model and trainer: the mirror is wired into the worker's reporter."""
    from trackio.sqlite_storage import SQLiteStorage

    from studio.runs import lifecycle
    from studio.runs.models import MetricPoint
    from trainers.demos.demo import demo_spec, make_demo_dataset
    from trainers.demos.tiny import build_tiny_model
    from workers.tasks import execute_run

    team, _ = world
    model = build_tiny_model(tmp_path / "model")
    spec = demo_spec(str(model), make_demo_dataset(tmp_path / "demo.jsonl"), tmp_path / "out",
                     optim={"total_steps": 2, "prompts_per_step": 2}, algorithm={"group_size": 2})  # fmt: skip
    services.save_team_defaults(team, {"trackio": {"enabled": True, "project": "worker-test"}, "rollouts_per_step": 3})
    run = lifecycle.create_run(team, spec, name="demo")
    assert execute_run(run.pk, "test-worker") == "succeeded"

    st = status(run, "trackio")
    assert (st.state, st.steps_sent, st.rollouts_sent, st.dropped) == ("done", 2, 6, 0), st.last_error
    logs = [e for e in SQLiteStorage.get_logs("worker-test", f"demo-{run.pk}") if "reward/mean" in e]
    studio = dict(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("step", "value"))
    assert {e["step"]: e["reward/mean"] for e in logs} == pytest.approx(studio)
    traces = SQLiteStorage.get_traces("worker-test", f"demo-{run.pk}")
    assert sorted(t["step"] for t in traces) == [1, 1, 1, 2, 2, 2]


# --- a secret goes only to the server it was set for ------------------------------------------------

TOKEN = "mlflow-token-of-the-owners-0123456789"  # noqa: S105 - a test value, valid nowhere


class Recorder:
    """A real HTTP server in front of the MLflow server that records every request's method, path and
    headers, then passes it on: one stands for the owners' tracking server, another for an editor's."""

    def __init__(self, upstream: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.upstream = httpx.Client(base_url=upstream, timeout=30)
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _pass(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.seen.append((self.command, self.path, dict(self.headers)))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                answer = recorder.upstream.request(self.command, self.path, content=body, headers=headers)
                self.send_response(answer.status_code)
                for key in ("Content-Type",):
                    if key in answer.headers:
                        self.send_header(key, answer.headers[key])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def tokens(self) -> list[str]:
        return [h.get("Authorization", "") for _, _, h in self.seen if TOKEN in h.get("Authorization", "")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.upstream.close()  # no connection left open for the MLflow server to wait on as it stops


@pytest.fixture
def servers(mlflow_server):
    own, editors = Recorder(mlflow_server), Recorder(mlflow_server)
    yield own, editors
    own.close()
    editors.close()


@pytest.fixture
def experiment_run(world, tmp_path):
    from studio.datasets import storage
    from studio.datasets.models import Dataset
    from studio.experiments.models import Experiment
    from studio.rubrics.models import Rubric
    from studio.runs.models import Run
    from tests.studio.base import ROWS, RUBRIC, write_jsonl

    team, run = world
    dataset = Dataset(team=team, name="qa.jsonl", source="server_file", format="jsonl",
                      path=str(write_jsonl(tmp_path / "qa.jsonl", ROWS)))  # fmt: skip
    storage.refresh(dataset)
    dataset.save()
    rubric = Rubric.objects.create(team=team, name="Correct", spec=RUBRIC, created_by=run.created_by)
    experiment = Experiment.objects.create(team=team, name="bound", dataset=dataset, rubric=rubric,
                                           model_path="/models/tiny", created_by=run.created_by)  # fmt: skip
    Run.objects.filter(pk=run.pk).update(experiment=experiment)
    run.refresh_from_db()
    return team, experiment, run


def mlflow_settings(uri: str, secret: str = "tok") -> dict:
    return {"inherit": False, "settings": {"mlflow": {"enabled": True, "tracking_uri": uri, "experiment": "bound",
            "auth": "token" if secret else "none", "secret": secret}, "rollouts_per_step": 1}}  # fmt: skip


def mirror_only(run, steps: int = 1) -> None:
    mirror = mirroring.start(run)
    assert mirror is not None
    train(mirror.wrap(MemoryReporter()), steps)
    mirror.close("succeeded", timeout_s=60)


def test_the_owners_secret_reaches_only_its_own_server_and_an_editor_cannot_move_it(experiment_run, servers):
    from django.contrib.auth import get_user_model
    from mlflow import MlflowClient
    from rest_framework.test import APIClient

    from studio.tracking.models import ExperimentMirror

    team, experiment, run = experiment_run
    own, editors = servers
    alice, bob = get_user_model().objects.get(username="alice"), people.person("bob")  # the owner, an editor
    owner, editor = APIClient(), APIClient()
    owner.force_login(alice)
    editor.force_login(bob)
    made = owner.post(f"/api/teams/{team.pk}/tracker-secrets/",
                      {"name": "tok", "kind": "mlflow", "value": TOKEN, "endpoint": own.url}, format="json")  # fmt: skip
    assert made.status_code == 201, made.content
    url = f"/api/experiments/{experiment.pk}/mirror-settings/"
    assert owner.put(url, mlflow_settings(own.url), format="json").status_code == 200

    # The owners' server: the token goes with every call (the tracking API and the artifact uploads).
    mirror_only(run)
    assert status(run, "mlflow").state == "done", status(run, "mlflow").last_error
    assert own.tokens() and len(own.tokens()) == len(own.seen)

    # An editor pointing the mirror at a server of their own is refused, and nothing changes.
    refused = editor.put(url, mlflow_settings(editors.url), format="json")
    assert refused.status_code == 403
    assert "is an owner's action" in refused.json()["detail"]
    assert services.experiment_settings(experiment)[1].mlflow.tracking_uri == own.url

    # Settings that point elsewhere all the same (a row written past the API): the worker sends nothing there.
    row = ExperimentMirror.objects.get(experiment=experiment)
    row.settings["mlflow"]["tracking_uri"] = editors.url
    row.save()
    assert mirroring.start(run) is None
    assert "is sent there only, not to" in status(run, "mlflow").last_error
    assert editors.seen == []
    row.settings["mlflow"]["tracking_uri"] = own.url
    row.save()

    # Checked right before sending: the secret bound anew (to the editor's server) after the mirror started
    # is not sent to the server the mirror was started with, nor anywhere else.
    sent_before = len(own.tokens())
    mirror = mirroring.start(run)
    services.set_secret(team, "tok", "mlflow", TOKEN, endpoint=editors.url)
    train(mirror.wrap(MemoryReporter()), 1)
    mirror.close("succeeded", timeout_s=60)
    st = status(run, "mlflow")
    assert st.state == "failed" and "not sent" in st.last_error, st.last_error
    assert len(own.tokens()) == sent_before and editors.seen == []
    services.set_secret(team, "tok", "mlflow", TOKEN, endpoint=own.url)

    # The owner moves the mirror: the secret bound to the old server is cleared, and the next write works there
    # without it.
    moved = owner.put(url, mlflow_settings(editors.url), format="json")
    assert moved.status_code == 200, moved.content
    assert set(moved.json()["cleared"]) == {"mlflow.secret"}
    mirror_only(run, steps=2)
    assert status(run, "mlflow").state == "done", status(run, "mlflow").last_error
    assert editors.seen and editors.tokens() == []  # the new server got the run, never the token
    assert all("Authorization" not in h for _, _, h in editors.seen)
    client = MlflowClient(tracking_uri=own.url)
    [found] = client.search_runs([client.get_experiment_by_name("bound").experiment_id],
                                 f"tags.`studio.run_id` = '{run.pk}'")  # fmt: skip
    history = client.get_metric_history(found.info.run_id, "reward/mean")  # the first mirror's step 1, then these
    assert sorted(m.step for m in history) == [1, 1, 2]


def test_the_token_goes_with_artifact_uploads_only_to_the_tracking_server(experiment_run, servers):
    """An MLflow experiment's artifact location may name any server (an editor can name the experiment):
    uploads there go without the token bound to the tracking server."""
    from mlflow import MlflowClient

    from workers.mirroring.mlflow_tracker import artifact_store_is

    team, experiment, run = experiment_run
    own, editors = servers
    MlflowClient(tracking_uri=own.url).create_experiment("elsewhere", artifact_location=f"{editors.url}/artifacts")
    services.set_secret(team, "tok", "mlflow", TOKEN, endpoint=own.url)
    chosen = mlflow_settings(own.url)["settings"]
    chosen["mlflow"]["experiment"] = "elsewhere"
    services.save_experiment_settings(experiment, False, chosen)
    mirror_only(run)
    assert own.tokens(), "the tracking API's calls carry the token"
    assert editors.seen, "the artifact uploads went to the experiment's artifact server"
    assert editors.tokens() == [] and all("Authorization" not in h for _, _, h in editors.seen)

    tracking = "http://127.0.0.1:5000"
    assert artifact_store_is("mlflow-artifacts:/1/abc/artifacts", tracking)  # proxied by the server itself
    assert artifact_store_is("mlflow-artifacts://127.0.0.1:5000/1/abc", tracking)
    assert not artifact_store_is("mlflow-artifacts://elsewhere:5000/1/abc", tracking)
    assert artifact_store_is("http://127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/1", tracking)
    assert not any(artifact_store_is(u, tracking) for u in ("http://127.0.0.1:6000/a", "s3://bucket/a", "file:///a"))
