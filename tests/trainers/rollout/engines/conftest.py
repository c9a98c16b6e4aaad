"""One OpenAI-compatible vLLM server per test session on the tiny model: a real vLLM process on
localhost, started and stopped here (about 25 s to start on this CPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.processes import free_port
from trainers.rollout.engines.vllm_server import VLLMServerClient, VLLMServerError, server_command, server_env

SERVER_START_S = 240


@pytest.fixture(scope="session")
def vllm_server(vllm_here, tiny_model_path, tmp_path_factory):
    """A running vLLM server for the tiny model: `.url`, `.client`, `.log` (its output file)."""
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    extra = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager", "--gpu-memory-utilization", "0.1",
             "--served-model-name", "tiny", "--seed", "0"]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(server_command(str(tiny_model_path), port=port, extra=extra), env=server_env(),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    server = type("Server", (), {})()
    server.url, server.log, server.proc = f"http://127.0.0.1:{port}", Path(log), proc
    server.client = VLLMServerClient(server.url, timeout=120)
    deadline = time.monotonic() + SERVER_START_S
    try:
        while True:
            try:
                server.client.model_name()
                break
            except VLLMServerError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-3000:]
                    pytest.fail(f"the vLLM server did not come up (exit {proc.poll()}):\n{tail}")
                time.sleep(0.5)
        yield server
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (API server, engine core, worker), SIGKILL after 30 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    print(f"vLLM server stopped (exit {proc.returncode})", file=sys.stderr)
