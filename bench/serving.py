"""The serving path: time to first token and tokens per second through the studio's OpenAI-compatible
endpoint (daphne, the token check, the proxy and relay, the worker's model server) against the same
engine's server called directly, with the official `openai` client on both sides.

A real studio (tests/browser/live_studio.py: daphne, a Celery worker, a private Redis, SQLite) serves a
run whose base model is `--model` (default: SmolLM2-135M-Instruct as `./studioctl setup` converts it,
in var/demo/smollm2-135m-instruct); the direct side starts the engine's server as the worker does
(workers.serving.engines.command) on a port of its own. Both sides run after one warm-up request, so
the endpoint's numbers leave out the model server's start (printed apart, as "first use").

    python bench/serving.py                                    # transformers, 4 requests x 64 tokens
    python bench/serving.py --engine vllm --requests 8 --max-tokens 128

Printed per side: the median time to the first content token, the median tokens per second of a
request after its first token (usage.completion_tokens), and the whole requests' mean seconds.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]


def measure(client, model: str, requests: int, max_tokens: int) -> dict[str, float]:
    firsts, rates, wholes = [], [], []
    for i in range(requests):
        start = time.perf_counter()
        first = None
        tokens = 0
        stream = client.chat.completions.create(model=model, messages=PROMPT, max_tokens=max_tokens, stream=True,
                                                temperature=0.7, seed=i, stream_options={"include_usage": True})  # fmt: skip
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
        end = time.perf_counter()
        firsts.append((first or end) - start)
        rates.append(max(tokens - 1, 0) / max(end - (first or end), 1e-9))
        wholes.append(end - start)
    return {"ttft_s": statistics.median(firsts), "tokens_per_s": statistics.median(rates),
            "request_s": statistics.mean(wholes)}  # fmt: skip


def wait_answers(address: str, key: str, process: subprocess.Popen, timeout: float = 900) -> None:
    from workers.serving.engines import answers

    deadline = time.monotonic() + timeout
    while not answers(address, key):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the direct server did not start ({process.returncode})")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["transformers", "vllm"], default="transformers")
    parser.add_argument("--model", default=str(ROOT / "var" / "demo" / "smollm2-135m-instruct"))
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    import openai

    from tests.studio.serving.served import start_serving_studio
    from workers.serving import engines

    folder = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    models = folder / "models"
    models.mkdir()
    (models / "base").symlink_to(Path(args.model).resolve())
    (models / "warm").symlink_to(Path(args.model).resolve())
    studio, records = start_serving_studio(folder / "studio", models, STUDIO_SERVING_ENGINE=args.engine,
                                           STUDIO_SERVING_START_TIMEOUT_S="900")  # fmt: skip
    try:
        run = records["runs"]["Ana's lab"]
        endpoint = openai.OpenAI(base_url=f"{studio.base_url}/v1", api_key=records["keys"]["ana"], timeout=900)
        start = time.perf_counter()
        endpoint.chat.completions.create(model=f"run-{run}/base", messages=PROMPT, max_tokens=4)
        first_use = time.perf_counter() - start
        through = measure(endpoint, f"run-{run}/base", args.requests, args.max_tokens)
    finally:
        studio.stop()
    port, key = 18000 + secrets.randbelow(2000), secrets.token_urlsafe(16)
    argv = engines.command(args.engine, "direct", args.model, "", {}, "127.0.0.1", port)
    env = {**os.environ, engines.KEY_ENV[args.engine]: key, "PYTHONPATH": str(ROOT)}
    log = (folder / "direct.log").open("w")
    process = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_answers(f"http://127.0.0.1:{port}", key, process)
        direct_client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, timeout=900)
        direct_client.chat.completions.create(model="direct", messages=PROMPT, max_tokens=4)
        direct = measure(direct_client, "direct", args.requests, args.max_tokens)
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)  # the studio's copies of the model
    print(f"engine {args.engine}, model {args.model}, {args.requests} requests x {args.max_tokens} tokens")
    print(f"first use through the endpoint (the worker starts the model server): {first_use:.1f} s")
    print(f"{'':12} {'TTFT s':>8} {'tokens/s':>9} {'request s':>10}")
    for name, row in (("direct", direct), ("endpoint", through)):
        print(f"{name:12} {row['ttft_s']:8.3f} {row['tokens_per_s']:9.1f} {row['request_s']:10.2f}")


if __name__ == "__main__":
    main()
