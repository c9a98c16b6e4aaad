"""What the sandbox enforces, checked directly on a worker process."""

import os

import pytest

from trainers.rewards import sandbox
from trainers.rewards.sandbox import Limits, SandboxError, Worker

LIMITS = Limits(timeout_s=2.0, memory_mb=256)


def call_once(source: str, *args):
    worker = Worker.start(LIMITS, source=source)
    try:
        return worker.call(*args)
    finally:
        worker.close()


def test_the_servers_environment_does_not_reach_user_code(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    result = call_once("import os\ndef score():\n    return sorted(os.environ)\n")
    assert result.ok
    assert "OPENAI_API_KEY" not in result.value


def test_stdin_is_closed_and_the_working_directory_is_a_fresh_temp_folder():
    source = "import os, sys\ndef score():\n    return [sys.stdin.read(), os.getcwd(), sorted(os.listdir('.'))]\n"
    result = call_once(source)
    stdin, cwd, listing = result.value
    assert stdin == ""
    assert os.path.basename(cwd).startswith("rubric-sandbox-")
    assert listing == [".sandbox-log"]
    assert not os.path.exists(cwd)  # deleted when the worker closed


def test_writing_past_the_file_size_limit_fails():
    limits = Limits(timeout_s=2.0, memory_mb=256, file_size_mb=1)
    worker = Worker.start(limits, source="def score():\n    open('big', 'w').write('x' * 3_000_000)\n    return 1\n")
    try:
        result = worker.call()
    finally:
        worker.close()
    assert not result.ok
    assert "file size limit exceeded" in result.error or "File too large" in result.error, result.error


def test_a_hung_load_is_cut_off():
    with pytest.raises(SandboxError, match="loading the code took longer than 0.5 s"):
        Worker.start(Limits(timeout_s=0.5), source="while True:\n    pass\n")


@pytest.mark.skipif(sandbox.isolation() != "namespace", reason="unshare cannot create namespaces here")
def test_in_a_network_namespace_even_the_raw_socket_module_cannot_connect():
    # _socket bypasses the in-process block; only the empty namespace stops it (loopback is down).
    source = "import _socket\ndef score():\n    s = _socket.socket()\n    s.settimeout(1)\n    s.connect(('127.0.0.1', 5432))\n    return 1\n"
    result = call_once(source)
    assert not result.ok
    assert "Network is unreachable" in result.error, result.error  # without the namespace it connects


def test_without_namespaces_the_socket_module_is_still_blocked(monkeypatch):
    monkeypatch.setattr(sandbox, "isolation_prefix", lambda: ())
    source = "import socket\ndef score():\n    socket.create_connection(('127.0.0.1', 5432), timeout=1)\n    return 1\n"
    result = call_once(source)
    assert not result.ok
    assert "network access is disabled in the sandbox" in result.error
