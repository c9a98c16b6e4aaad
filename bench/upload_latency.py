"""Run-list latency while a 200 MB file of random bytes named `.jsonl` is uploaded.

Starts the studio as a user would (`python -m launcher up`, its own data folder and embedded Redis)
from the checkout given (default: this one), uploads the file through the API while another thread
asks for /api/runs/ every 0.1 s, and prints one JSON line: the upload's answer and time, and the
run-list latencies before and during the upload.

    python bench/upload_latency.py [CHECKOUT] [--port 8731] [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

PASSWORD = "pw-bench-upload-123"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--port", type=int, default=8731)
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="upload-latency-") as tmp:
        data = Path(tmp)
        blob = data / "random.jsonl"
        with blob.open("wb") as out:
            for _ in range(args.mb):
                out.write(os.urandom(1 << 20))
        studio = start_studio(Path(args.checkout), data, args.port)
        try:
            print(json.dumps(measure(f"http://127.0.0.1:{args.port}", blob, data)))
        finally:
            os.killpg(studio.pid, signal.SIGTERM)
            studio.wait(60)


def start_studio(checkout: Path, data: Path, port: int) -> subprocess.Popen:
    env = dict(os.environ, STUDIO_DATA_DIR=str(data / "var"), STUDIO_PORT=str(port), STUDIO_ADMIN_PASSWORD=PASSWORD,
               LOG_LEVEL="WARNING")  # fmt: skip
    env.pop("REDIS_URL", None)
    log = data / "up.log"
    studio = subprocess.Popen([sys.executable, "-m", "launcher", "up"], cwd=checkout, env=env, stdout=log.open("w"),
                              stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    deadline = time.time() + 300
    while "is up" not in log.read_text():
        if time.time() > deadline or studio.poll() is not None:
            raise SystemExit(log.read_text()[-3000:])
        time.sleep(0.5)
    return studio


def measure(base: str, blob: Path, data: Path) -> dict:
    token = requests.post(f"{base}/api/token/", data={"username": "admin", "password": PASSWORD}).json()["token"]
    headers = {"Authorization": f"Token {token}"}
    teams = requests.get(f"{base}/api/teams/", headers=headers).json()
    team = (teams["results"] if isinstance(teams, dict) else teams)[0]["id"]

    def run_list() -> float:
        start = time.perf_counter()
        requests.get(f"{base}/api/runs/", headers=headers).raise_for_status()
        return time.perf_counter() - start

    idle = [run_list() for _ in range(10)]
    during, done = [], threading.Event()

    def poll() -> None:
        while not done.is_set():
            during.append(run_list())
            time.sleep(0.1)

    poller = threading.Thread(target=poll)
    poller.start()
    start = time.perf_counter()
    with blob.open("rb") as file:
        answer = requests.post(f"{base}/api/datasets/", headers=headers, data={"team": team, "name": "random"},
                               files={"file": (blob.name, file)})  # fmt: skip
    upload_s = time.perf_counter() - start
    done.set()
    poller.join()
    kept = [str(p.relative_to(data)) for p in (data / "var" / "datasets").rglob("*") if p.is_file()]
    return {
        "upload_status": answer.status_code, "upload_s": round(upload_s, 2), "upload_answer": answer.text[:200],
        "run_list_idle_median_ms": round(1000 * statistics.median(idle), 1), "run_list_during_n": len(during),
        "run_list_during_median_ms": round(1000 * statistics.median(during), 1),
        "run_list_during_max_ms": round(1000 * max(during), 1), "files_kept": kept,
    }  # fmt: skip


if __name__ == "__main__":
    main()
