"""`python -m launcher up` (what ./studioctl up runs) as a new user starts it, in a temp data
folder on a free port: the banner (address, first login, workers, logs) comes last, once the
web port answers and both workers answer a ping; the workers' output goes to log files; Ctrl-C
leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import pytest

from launcher.processes import ROOT, free_port
from launcher.readiness import Readiness, banner
from launcher.studio import ROOT_WARNING, worker_argv
from tests.launcher.studio_up import BANNER_END, PASSWORD, descendants, start_up, still_running

QUIET_S = 3.0  # after the banner, this long with requests made and nothing more printed


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("studio-up")
    port = free_port()
    proc, output = start_up(data_dir, port)
    yield {"proc": proc, "output": output, "port": port, "data_dir": data_dir}
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_banner_comes_last_once_the_web_port_and_both_workers_answer(studio):
    output, port = studio["output"], studio["port"]
    assert httpx.get(f"http://127.0.0.1:{port}/login/").status_code == 200  # the address answers
    time.sleep(QUIET_S)  # worker banners, access-log lines or warnings would arrive by now
    output.drain()
    text = "".join(output.lines).strip()  # the banner may be the first thing printed
    last_block = text.split("\n\n")[-1]
    assert last_block.startswith(f"Rollout Studio is up: http://localhost:{port}/"), text[-2000:]
    assert f"first login: admin / {PASSWORD}" in last_block
    assert "workers ready: local@" in last_block and "local-score@" in last_block
    logs = studio["data_dir"] / "logs"
    assert f"logs: {logs}/" in last_block
    assert last_block.endswith(BANNER_END)
    # The workers' output is kept, in their log files, not on the console.
    assert "[queues]" not in text and "[tasks]" not in text and "superuser" not in text
    assert " ready." in (logs / "worker.log").read_text() and " ready." in (logs / "scorer.log").read_text()
    assert "GET /login/" in (logs / "web.log").read_text()
    if os.geteuid() == 0:  # expected under `up` as root: not warned about, not even in the logs
        assert ROOT_WARNING not in (logs / "worker.log").read_text()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ctrl_c_stops_every_process_up_started(studio):
    proc = studio["proc"]
    before = descendants(proc.pid)
    names = " ".join(before.values())
    assert "daphne" in names and "celery" in names and "redis-server" in names, before
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0
    left = still_running(before)
    assert not left, left


def test_a_worker_that_does_not_answer_is_named_in_the_banner_instead_of_ready(tmp_path):
    ready = Readiness(web=True, answered={"local@h"}, waited_for=["local@h", "local-score@h"])
    text = banner("http://localhost:8000/", ready, None, tmp_path / "first-login.txt", tmp_path / "logs")
    assert "worker local-score@h did not answer a ping" in text
    assert "workers ready" not in text
    assert "first login" not in text  # no file, no user made now: nothing to point at


def test_a_later_start_says_where_the_first_login_is_kept(tmp_path):
    kept = tmp_path / "first-login.txt"
    kept.write_text("username: admin\n")
    ready = Readiness(web=True, answered={"w@h"}, waited_for=["w@h"])
    assert f"first login: in {kept}" in banner("http://localhost:8000/", ready, None, kept, tmp_path / "logs")


def test_the_root_warning_filter_matches_celerys_own_message():
    """What `up` gives its workers when it runs as root silences Celery's warning, and only it."""
    python = worker_argv("gpu", 1, "w@%h", root_expected=True)[:3]
    code = (
        "import warnings; from celery.exceptions import SecurityWarning; from celery.platforms import ROOT_DISCOURAGED\n"
        "warnings.warn(SecurityWarning(ROOT_DISCOURAGED.format(uid=0, euid=0, gid=0, egid=0)))\n"
        "warnings.warn(SecurityWarning('another security warning'))\n"
    )
    out = subprocess.run([*python, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "superuser" not in out.stderr and "another security warning" in out.stderr
    assert worker_argv("gpu", 1, "w@%h")[1:3] == ["-m", "celery"]  # `studioctl worker` keeps the warning
