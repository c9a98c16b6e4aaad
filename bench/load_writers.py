"""The load bench's synthetic trainers (a process of their own, started by bench/load_studio.py).

Not real training (the machine has 2 cores): threads that report at a steady rate through the two
real paths a run's data takes into the studio, each metric carrying the wall time it was reported at
(`bench/sent_at`) so a websocket client can tell how long the write took to reach it:

- studio runs: the worker's own `workers.reporting.DatabaseReporter` (rows and events in one transaction,
  published to the run's channel-layer group after commit), in the trainer loop's order: metrics, a log
  line, then the step's rollouts, which close the step and flush it;
- ingested runs: `rollout_client.StudioRun` (the client a TRL or verl machine uses), one batch per
  step posted to /api/ingest/runs/<id>/batches/ over HTTP with the run token.

    python bench/load_writers.py CONFIG.json        # until SIGTERM

CONFIG holds {"url", "rate", "history", "studio_runs": [ids], "ingest_runs": [{"id", "token"}]}. Prints
one JSON line of counts at the end: steps, metric points and rollouts each writer reported, and the
ingest posts' latency.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

from trainers.report import CriterionScore, Rollout  # noqa: E402

STOP = threading.Event()  # SIGTERM: each writer finishes its step, flushes and stops
GROUP = 8  # rollouts per step: 2 prompts x 4 samples
WORDS = "the answer is so we add then multiply carry the remainder and check each step".split()  # noqa: SIM905


def metric_values(step: int) -> dict[str, float]:
    return {"reward/mean": min(1.0, step / 500), "reward/std": 0.2, "actor/kl": 0.001 * step ** 0.5,
            "actor/loss": 0.1, "actor/entropy": 1.5 - step / 1000, "actor/grad_norm": 0.7,
            "response/length_mean": 40.0, "timing/step_s": 1.0, "perf/tokens_per_s": 900.0,
            "bench/sent_at": time.time()}  # fmt: skip


def completion(step: int, i: int) -> str:
    return " ".join(WORDS[(step + i + k) % len(WORDS)] for k in range(40)) + f" = {step * i}"


def studio_writer(run_id: int, rate: float, history: int, counts: dict) -> None:
    from workers.reporting import DatabaseReporter

    reporter = DatabaseReporter(run_id)
    step = 0
    interval, next_at = 1.0 / rate, time.time()
    while not STOP.is_set():
        step += 1
        reporter.metrics(step, metric_values(step))
        reporter.log(f"step {step}")
        group = [
            Rollout(step=step, prompt_id=f"p{step % 50}-{i // 4}", sample_index=i % 4, prompt=f"What is {step} x {i}?",
                    completion=completion(step, i), reward=float(i % 2), advantage=0.5 - i % 2,
                    scores={"correct": CriterionScore(float(i % 2))})
            for i in range(GROUP)
        ]  # fmt: skip
        reporter.rollouts(step, group)  # closes the step: one flush, as the trainer loop does
        counts["steps"] += 1
        counts["metrics"] += len(metric_values(step))
        counts["rollouts"] += GROUP
        if step > history:  # the history is written as fast as it goes, then the steady rate
            next_at += interval
            STOP.wait(max(0.0, next_at - time.time()))
        else:
            next_at = time.time()
    reporter.flush()


def ingest_writer(url: str, run: dict, rate: float, history: int, counts: dict) -> None:
    from rollout_client import StudioRun

    client = StudioRun(url, run["id"], run["token"], timeout_s=30.0)
    client.status("running")
    client.settings({"algorithm": "grpo", "bench": True}, criteria=["correct"])
    step = 0
    interval, next_at = 1.0 / rate, time.time()
    while not STOP.is_set():
        step += 1
        client.metrics(step, metric_values(step))
        client.rollouts(step, [
            {"prompt": f"What is {step} x {i}?", "completion": completion(step, i), "reward": float(i % 2),
             "scores": {"correct": float(i % 2)}, "advantage": 0.5 - i % 2, "prompt_id": f"p{step % 50}-{i // 4}",
             "sample_index": i % 4}
            for i in range(GROUP)
        ])  # fmt: skip
        started = time.perf_counter()
        stored = client.flush(wait_s=30.0)
        counts["post_ms"].append((time.perf_counter() - started) * 1000)
        if not stored:
            counts["failed_posts"] += 1
        counts["steps"] += 1
        counts["metrics"] += len(metric_values(step))
        counts["rollouts"] += GROUP
        if step > history:
            next_at += interval
            STOP.wait(max(0.0, next_at - time.time()))
        else:
            next_at = time.time()
    client.flush(wait_s=60.0)


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    rate, history = float(config["rate"]), int(config["history"])
    counts: dict[str, dict] = {}
    threads = []
    for run_id in config["studio_runs"]:
        counts[f"studio-{run_id}"] = c = {"steps": 0, "metrics": 0, "rollouts": 0}
        threads.append(threading.Thread(target=studio_writer, args=(run_id, rate, history, c)))
    for run in config["ingest_runs"]:
        counts[f"ingest-{run['id']}"] = c = {"steps": 0, "metrics": 0, "rollouts": 0, "post_ms": [], "failed_posts": 0}
        threads.append(threading.Thread(target=ingest_writer, args=(config["url"], run, rate, history, c)))
    for t in threads:
        t.start()
    print(json.dumps({"ready": True}), flush=True)
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(timeout=0.5)  # the main thread must stay free to take SIGTERM
    print(json.dumps({"counts": counts}), flush=True)


if __name__ == "__main__":
    main()
