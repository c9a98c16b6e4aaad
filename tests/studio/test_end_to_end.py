"""The whole studio as a user starts it: `python -m launcher up` (what ./studioctl up runs)
with a real Celery worker, the real broker and daphne. Drives the API over HTTP and reads the
run's websocket with a real client; ends with Ctrl-C (SIGINT) and checks a clean stop.

Default: SQLite file + the embedded Redis the launcher starts. Under the team-scale pass
(DATABASE_URL=postgres://...) it uses a fresh PostgreSQL database and Redis db 14.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from websockets.sync.client import connect

from launcher.processes import ROOT, free_port
from tests.passes import database_independent
from tests.workers.usage_checks import check_usage

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
PASSWORD = "e2e-password-123"


def _team_scale_env(env: dict[str, str]):
    """A throwaway PostgreSQL database and a Redis db of its own; yields the cleanup."""
    import psycopg
    import redis

    url = urlsplit(env["DATABASE_URL"])
    name = f"studio_e2e_{uuid.uuid4().hex[:8]}"
    admin = urlunsplit(url._replace(path="/postgres"))
    with psycopg.connect(admin.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    env["DATABASE_URL"] = urlunsplit(url._replace(path=f"/{name}"))
    redis_url = urlunsplit(urlsplit(env["REDIS_URL"])._replace(path="/14"))
    redis.Redis.from_url(redis_url).flushdb()
    env["REDIS_URL"] = redis_url

    def cleanup() -> None:
        with psycopg.connect(admin.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return cleanup


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("studio-e2e")
    port = free_port()
    env = {**os.environ, "STUDIO_DATA_DIR": str(data_dir), "STUDIO_ADMIN_PASSWORD": PASSWORD, "PYTHONUNBUFFERED": "1",
           # Short heartbeat timings so the lost-worker test takes seconds, not a minute.
           "STUDIO_HEARTBEAT_INTERVAL_S": "1", "STUDIO_HEARTBEAT_TIMEOUT_S": "8", "STUDIO_SWEEP_EVERY_S": "2"}  # fmt: skip
    cleanup = None
    if env.get("DATABASE_URL", "").startswith("postgres") and env.get("REDIS_URL"):
        cleanup = _team_scale_env(env)
    else:
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)  # the launcher starts its own embedded Redis, as for a new user
    proc = subprocess.Popen([sys.executable, "-m", "launcher", "up", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    deadline = time.monotonic() + 180
    while True:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            proc.kill()
            pytest.fail("the studio did not come up in 180 s:\n" + "".join(log[-40:]))
        log.append(line)
        if "Rollout Studio is up" in line:
            break
        if proc.poll() is not None:
            pytest.fail("the launcher exited:\n" + "".join(log[-40:]))
    threading.Thread(target=lambda: [log.append(x) for x in iter(lines.get, None)], daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    token = httpx.post(f"{base}/api/token/", data={"username": "admin", "password": PASSWORD}).json()["token"]
    client = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=90)
    yield {"proc": proc, "client": client, "port": port, "token": token, "log": log, "data_dir": Path(data_dir)}
    client.close()
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    if cleanup:
        cleanup()


def demo_experiment(client: httpx.Client) -> dict:
    experiments = client.get("/api/experiments/").json()["results"]
    assert len(experiments) == 1, experiments  # the first start made the demo
    return experiments[0]


def watch(studio, run_id: int, until) -> list[dict]:
    """Websocket messages of a run until `until(message)` is true."""
    url = f"ws://127.0.0.1:{studio['port']}/ws/runs/{run_id}/?after=0&token={studio['token']}"
    messages = []
    with connect(url, open_timeout=30) as ws:
        while True:
            message = json.loads(ws.recv(timeout=120))
            messages.append(message)
            if until(message):
                return messages


def test_a_new_user_launches_the_demo_watches_it_learn_live_and_cancels_a_second_run(studio):
    client = studio["client"]
    experiment = demo_experiment(client)
    response = client.post(
        f"/api/experiments/{experiment['id']}/launch/", json={"overrides": {"optim": {"total_steps": 6}}}
    )
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    messages = watch(
        studio, run_id, lambda m: m.get("kind") == "status" and m["data"]["state"] in ("succeeded", "failed")
    )
    assert messages[0]["kind"] == "hello"
    assert messages[-1]["data"]["state"] == "succeeded", client.get(f"/api/runs/{run_id}/").json()["error"]
    events = messages[1:]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    metric_steps = [e["step"] for e in events if e["kind"] == "metrics"]
    assert metric_steps == [1, 2, 3, 4, 5, 6]
    assert all("reward/mean" in e["data"]["values"] for e in events if e["kind"] == "metrics")
    items = [i for e in events if e["kind"] == "rollouts" for i in e["data"]["items"]]
    assert len(items) == 6 * 8 * 8 and {"id", "reward", "scores", "preview"} <= set(items[0])
    run = client.get(f"/api/runs/{run_id}/").json()
    assert (run["state"], run["last_step"]) == ("succeeded", 6)
    usage_agrees(run, events, items)  # what it used (issue 41): against its own timings, metrics and rollouts
    page = client.get(f"/api/runs/{run_id}/rollouts/?order=-reward&limit=5").json()
    assert len(page["results"]) == 5 and page["next_cursor"]

    # A long second run, cancelled once the websocket shows it is training.
    response = client.post(
        f"/api/experiments/{experiment['id']}/launch/", json={"overrides": {"optim": {"total_steps": 500}}}
    )
    second = response.json()["id"]
    watch(studio, second, lambda m: m.get("kind") == "metrics" and m["step"] >= 2)
    assert client.post(f"/api/runs/{second}/cancel/").status_code == 200
    messages = watch(
        studio,
        second,
        lambda m: m.get("kind") == "status" and m["data"]["state"] in ("cancelled", "failed", "succeeded"),
    )
    assert messages[-1]["data"]["state"] == "cancelled"
    run = client.get(f"/api/runs/{second}/").json()
    assert run["state"] == "cancelled" and 2 <= run["last_step"] < 500
    events = messages[1:]
    usage_agrees(run, events, [i for e in events if e["kind"] == "rollouts" for i in e["data"]["items"]])


def usage_agrees(run: dict, events: list[dict], items: list[dict]) -> None:
    """The run's usage (the API's `usage`) against its started/finished times, each step's metrics (the
    websocket's) and its training rollouts' tokens: one CPU process, every step counted once."""
    check_usage(run["usage"], started=run["started"], finished=run["finished"], processes=1,
                step_metrics=[e["data"]["values"] for e in events if e["kind"] == "metrics"],
                rollout_tokens=sum(i["num_tokens"] for i in items if i["split"] == "train"))  # fmt: skip


def test_try_it_scores_on_the_worker_and_bad_rubric_code_gets_a_clear_error(studio):
    client = studio["client"]
    rubric = client.get("/api/rubrics/").json()["results"][0]
    pairs = [{"prompt": "Repeat the letter: a", "answer": "a", "completion": "aaaa"},
             {"prompt": "Repeat the letter: a", "answer": "a", "completion": "abab"}]  # fmt: skip
    response = client.post(f"/api/rubrics/{rubric['id']}/try/", json={"pairs": pairs})
    assert response.status_code == 200, response.text
    assert [r["scores"]["letter"]["score"] for r in response.json()["results"]] == [1.0, 0.5]
    assert "4 of 4" in response.json()["results"][0]["scores"]["letter"]["explanation"]

    def rubric_with(code: str) -> dict:
        return {"criteria": [{"name": "mine", "kind": "python", "params": {"code": code, "timeout_s": 2}}]}

    raising = client.post(
        f"/api/rubrics/{rubric['id']}/try/",
        json={
            "pairs": pairs[:1],
            "spec": rubric_with("def score(prompt, completion, **f):\n    raise RuntimeError('boom')\n"),
        },
    )
    assert raising.status_code == 200, raising.text
    verdict = raising.json()["results"][0]["scores"]["mine"]
    assert verdict["score"] == 0 and "boom" in verdict["error"]

    started = time.monotonic()
    hanging = client.post(
        f"/api/rubrics/{rubric['id']}/try/",
        json={
            "pairs": pairs[:1],
            "spec": rubric_with("def score(prompt, completion, **f):\n    while True:\n        pass\n"),
        },
    )
    assert hanging.status_code == 200, hanging.text
    verdict = hanging.json()["results"][0]["scores"]["mine"]
    assert verdict["score"] == 0 and verdict["error"], verdict
    assert time.monotonic() - started < 30
    assert client.get("/api/runs/").status_code == 200  # nothing else broke

    # The worker's sandbox does not show the studio's data folder (database, secret key, first
    # login). Only bubblewrap hides it; the weak fallback cannot, and the sandbox docs say so.
    from trainers.sandbox.process import isolation

    if isolation() == "bubblewrap":
        secret = studio["data_dir"] / "first-login.txt"
        assert secret.exists()
        code = f"def score(prompt, completion, **f):\n    return float(len(open({str(secret)!r}).read()) > 0)\n"
        peeking = client.post(f"/api/rubrics/{rubric['id']}/try/", json={"pairs": pairs[:1], "spec": rubric_with(code)})
        verdict = peeking.json()["results"][0]["scores"]["mine"]
        assert verdict["score"] == 0 and "FileNotFoundError" in verdict["error"], verdict

    invalid = client.post(
        f"/api/rubrics/{rubric['id']}/try/",
        json={"pairs": pairs[:1], "spec": {"criteria": [{"name": "x", "kind": "regex", "params": {}}]}},
    )
    assert invalid.status_code == 400
    assert any(k.startswith("spec.criteria.0") and k.endswith("pattern") for k in invalid.json()), invalid.json()


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (read from /proc), children first."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    out, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        out += children
        frontier = children
    return out


def run_to_the_end(studio, experiment_id: int, overrides: dict, cancel_at_step: int | None = None) -> list[dict]:
    """Launch the experiment with `overrides`, optionally cancel it at a step; its websocket events."""
    client = studio["client"]
    response = client.post(f"/api/experiments/{experiment_id}/launch/", json={"overrides": overrides})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    if cancel_at_step is not None:
        watch(studio, run_id, lambda m: m.get("kind") == "metrics" and m["step"] >= cancel_at_step)
        assert client.post(f"/api/runs/{run_id}/cancel/").status_code == 200
    messages = watch(
        studio,
        run_id,
        lambda m: m.get("kind") == "status" and m["data"]["state"] in ("succeeded", "failed", "cancelled"),
    )
    want = "succeeded" if cancel_at_step is None else "cancelled"
    assert messages[-1]["data"]["state"] == want, client.get(f"/api/runs/{run_id}/").json()["error"]
    return messages


def vllm_pool_process(studio) -> int:
    """The Celery pool process (below a worker's main process) that has vLLM loaded."""
    pool = [p for p in descendants(studio["proc"].pid)
            if "celery" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="ignore")]  # fmt: skip
    with_vllm = [p for p in pool if "/vllm/" in Path(f"/proc/{p}/maps").read_text(errors="ignore")]
    assert len(with_vllm) == 1, f"expected one pool process with vLLM loaded, found {with_vllm}"
    return with_vllm[0]


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


@database_independent
def test_a_vllm_run_on_the_worker_samples_the_trained_policy_and_gives_its_memory_back(studio):
    """rollout.engine = vllm (the CPU build here) inside the Celery prefork child that runs trainings.
    Ten steps, each pushing its update to vLLM: the gap at every step says vLLM samples the policy being
    trained (that the demo then learns is test_learning's; with vLLM, bench/real_learning.py's: this
    test trained 60 steps to see it learn until the suite had to fit CI's 90 minutes)."""
    experiment = demo_experiment(studio["client"])
    vllm = {"engine": "vllm", "vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1}
    messages = run_to_the_end(studio, experiment["id"], {"rollout": vllm, "optim": {"total_steps": 10}})
    values = [e["data"]["values"] for e in messages if e.get("kind") == "metrics"]
    assert len(values) == 10
    gap = [v["rollout/logprob_gap_mean"] for v in values]
    print(f"\nvLLM run on the worker: vLLM/trainer logprob gap per token: max {max(gap):.2e}")
    assert max(gap) < 1e-4  # float32 on both sides

    # The pool process goes on to the next runs: a finished and a cancelled run leave it the same size.
    pid = vllm_pool_process(studio)
    after_first = rss_mib(pid)
    run_to_the_end(studio, experiment["id"], {"rollout": vllm, "optim": {"total_steps": 3}})
    after_second = rss_mib(pid)
    run_to_the_end(studio, experiment["id"], {"rollout": vllm, "optim": {"total_steps": 500}}, cancel_at_step=2)
    after_cancelled = rss_mib(pid)
    assert vllm_pool_process(studio) == pid
    print(f"RSS of the pool process after each vLLM run (MiB): {after_first:.0f}, {after_second:.0f}, "
          f"{after_cancelled:.0f} (cancelled)")  # fmt: skip
    assert max(after_second, after_cancelled) - after_first < 64


def test_a_run_whose_worker_process_dies_is_marked_failed_with_the_reason(studio):
    client = studio["client"]
    experiment = demo_experiment(client)
    run_id = client.post(
        f"/api/experiments/{experiment['id']}/launch/",
        # No automatic restart: this test is about the failure (tests/workers/test_run_faults.py: the restart).
        json={"overrides": {"optim": {"total_steps": 500}, "checkpoint": {"max_restarts": 0}}},
    ).json()["id"]
    watch(studio, run_id, lambda m: m.get("kind") == "metrics" and m["step"] >= 1)
    # Kill the Celery pool processes (below the worker's main process) as an OOM killer would.
    pool = [
        p
        for p in descendants(studio["proc"].pid)
        if "celery" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="ignore")
    ]
    masters = set(pool) & {int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) for p in pool}
    for pid in set(pool) - masters:
        os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    messages = watch(
        studio,
        run_id,
        lambda m: m.get("kind") == "status" and m["data"]["state"] in ("failed", "succeeded", "cancelled"),
    )
    assert messages[-1]["data"]["state"] == "failed"
    assert time.monotonic() - killed_at < 60
    # Celery's WorkerLostError ends it at once; a machine gone would be found by the heartbeat ("worker lost").
    assert "its process died" in client.get(f"/api/runs/{run_id}/").json()["error"]


def test_the_pages_render_and_ctrl_c_stops_everything_cleanly(studio):
    client = studio["client"]
    login = httpx.get(f"http://127.0.0.1:{studio['port']}/login/")
    assert login.status_code == 200 and "Sign in" in login.text
    assert httpx.get(f"http://127.0.0.1:{studio['port']}/static/css/app.css").status_code == 200
    proc = studio["proc"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0
    time.sleep(0.5)
    assert "stopped" in "".join(studio["log"])
    with pytest.raises(httpx.ConnectError):
        client.get("/api/runs/")
