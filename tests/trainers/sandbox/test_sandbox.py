"""What the sandbox enforces, checked directly on a worker process.

Most of these need bubblewrap working here (`sandbox.isolation() == "bubblewrap"`); without it
every start is refused (tested below), so the other tests fail with the refusal's message,
which says how to install it.
"""

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

from trainers.sandbox import process as sandbox
from trainers.sandbox.process import ALLOW_WEAK_ENV, BWRAP_ENV, HIDE_ENV, SANDBOX_ID, Limits, SandboxError, Worker
from trainers.sandbox.programs import run_program_tests

LIMITS = Limits(timeout_s=2.0, memory_mb=256)
needs_bubblewrap = pytest.mark.skipif(sandbox.isolation() != "bubblewrap", reason="bubblewrap cannot run here")

# Returns, for each path, its text or the name of the error that reading it raised.
READ_EACH = """
def score(*paths):
    out = {}
    for path in paths:
        try:
            with open(path) as f:
                out[path] = f.read()
        except OSError as exc:
            out[path] = type(exc).__name__
    return out
"""
LIST = "import os\ndef score(path):\n    try:\n        return sorted(os.listdir(path))\n    except OSError as exc:\n        return type(exc).__name__\n"


def call_once(source: str, *args):
    worker = Worker.start(LIMITS, source=source)
    try:
        return worker.call(*args)
    finally:
        worker.close()


def names_on_the_way_to_the_interpreter(folder: str) -> set[str]:
    """The entries of `folder` the sandbox must show: first steps of the paths to the interpreter's
    folders (a pyenv Python under /root shows `.pyenv` there, and nothing else)."""
    return {
        Path(p).relative_to(folder).parts[0] for p in sandbox._python_dirs() if p.startswith(folder.rstrip("/") + "/")
    }


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
    assert listing == []  # nothing of the host's in it: the log travels over a pipe
    assert not os.path.exists(cwd)  # only ever inside the sandbox (its /tmp), or deleted when the worker closed


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


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A token under the worker user's home (HOME points at a temporary one) and a file in a
    temporary folder that is not the sandbox's; this process can read both."""
    home = tmp_path / "home"
    token = home / ".cache" / "huggingface" / "token"
    token.parent.mkdir(parents=True)
    token.write_text("hf_do_not_leak")
    elsewhere = tmp_path / "elsewhere" / "notes.txt"
    elsewhere.parent.mkdir()
    elsewhere.write_text("another team's notes")
    monkeypatch.setenv("HOME", str(home))
    return [str(token), str(elsewhere)]


@needs_bubblewrap
def test_user_code_cannot_read_files_outside_its_view(planted):
    assert [Path(p).read_text() for p in planted] == ["hf_do_not_leak", "another team's notes"]
    result = call_once(READ_EACH, *planted, "/etc/shadow", "/etc/hostname")
    assert result.value == dict.fromkeys([*planted, "/etc/shadow", "/etc/hostname"], "FileNotFoundError")


@needs_bubblewrap
@pytest.mark.parametrize(
    ("folder", "may_show"),
    [
        ("/root", lambda: names_on_the_way_to_the_interpreter("/root")),
        (os.path.expanduser("~"), lambda: names_on_the_way_to_the_interpreter(os.path.expanduser("~"))),
        ("/etc", lambda: {"group", "ld.so.cache", "localtime", "passwd"}),
        # The project tree: only the child script's folder (and the virtual environment, if it lives there).
        (sandbox._project_root(), lambda: {"trainers"} | names_on_the_way_to_the_interpreter(sandbox._project_root())),
        (str(sandbox.CHILD.parent), lambda: {sandbox.CHILD.name}),
    ],
)
def test_folders_show_only_what_the_interpreter_needs(folder, may_show):
    result = call_once(LIST, folder)
    assert result.ok, result.error
    shown = set(result.value) if isinstance(result.value, list) else set()
    assert shown <= may_show(), (folder, result.value)


@needs_bubblewrap
def test_user_code_runs_as_an_unprivileged_user_without_capabilities():
    source = "import getpass, os\ndef score():\n    return os.getuid(), os.getgid(), getpass.getuser(), open('/proc/self/status').read()\n"
    uid, gid, user, status = call_once(source).value
    assert (uid, gid, user) == (int(SANDBOX_ID), int(SANDBOX_ID), "sandbox")
    caps = dict(line.split(":\t") for line in status.splitlines() if line.startswith("Cap"))
    assert {k: int(v, 16) for k, v in caps.items()} == {"CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0}


@needs_bubblewrap
def test_a_hidden_folder_inside_the_view_is_covered(monkeypatch):
    # A trusted import sees the whole `trainers` package; hide one folder of it, as the workers
    # hide the studio's data folder should it ever lie inside the view.
    criteria = str(sandbox.CHILD.parents[1] / "rewards" / "criteria")
    monkeypatch.setenv(HIDE_ENV, criteria)
    worker = Worker.start(LIMITS, trusted_import="os:listdir")
    try:
        assert worker.call(criteria).value == []
    finally:
        worker.close()
    monkeypatch.delenv(HIDE_ENV)
    worker = Worker.start(LIMITS, trusted_import="os:listdir")
    try:
        assert "python.py" in worker.call(criteria).value
    finally:
        worker.close()


def processes_below(pid: int) -> set[int]:
    """Every live (not zombie) process below `pid`, read from /proc."""
    parents, states = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)], states[int(stat.parent.name)] = int(fields[1]), fields[0]
    out, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier and states[p] != "Z"}
        out |= frontier
    return out


@needs_bubblewrap
def test_processes_user_code_forks_die_with_the_worker():
    before = processes_below(os.getpid())
    source = "import os, time\ndef score():\n    for _ in range(3):\n        if os.fork() == 0:\n            time.sleep(60)\n    return 1\n"
    worker = Worker.start(LIMITS, source=source)
    assert worker.call().value == 1
    started = processes_below(os.getpid()) - before
    assert len(started) >= 5  # bwrap, its init, the worker and three sleepers
    worker.close()
    deadline = time.monotonic() + 5  # the kernel kills them once bwrap is gone; give it a moment
    while (alive := {p for p in started if is_alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive


def is_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@needs_bubblewrap
def test_in_a_network_namespace_even_the_raw_socket_module_reaches_nothing():
    # _socket bypasses the in-process block; only the namespace stops it. A port listening on this
    # machine's loopback is not the sandbox's loopback, and nothing outside has a route.
    source = (
        "import _socket\ndef score(host, port):\n    s = _socket.socket()\n    s.settimeout(1)\n"
        "    try:\n        s.connect((host, port))\n    except OSError as exc:\n        return exc.strerror\n    return 'connected'\n"
    )
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=1).close()  # reachable from here
        assert call_once(source, "127.0.0.1", port).value == "Connection refused"
    assert call_once(source, "1.1.1.1", 53).value == "Network is unreachable"


@pytest.fixture
def no_bwrap(tmp_path, monkeypatch):
    """bwrap looked up at a path that does not exist; sandbox folders made under tmp_path."""
    monkeypatch.setenv(BWRAP_ENV, str(tmp_path / "no-bwrap"))
    monkeypatch.delenv(ALLOW_WEAK_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_without_bubblewrap_user_code_is_refused_and_the_error_says_how_to_install_it(no_bwrap):
    assert sandbox.isolation() == "weak"
    with pytest.raises(SandboxError) as refused:
        Worker.start(LIMITS, source="def score():\n    return 1\n")
    message = str(refused.value)
    assert f"{no_bwrap / 'no-bwrap'} (named by {BWRAP_ENV}" in message
    assert "apt-get install bubblewrap" in message and f"{ALLOW_WEAK_ENV}=1" in message
    run = run_program_tests("print(1)", [{"input": "", "output": "1"}], "stdio", LIMITS)
    assert (run.results, run.fatal) == ({}, message)
    assert not list(no_bwrap.glob("rubric-sandbox-*"))  # nothing was started


def test_a_bwrap_that_cannot_create_namespaces_is_refused_too(no_bwrap, monkeypatch):
    monkeypatch.setenv(BWRAP_ENV, shutil.which("false"))  # exits 1, as bwrap does when namespaces are refused
    with pytest.raises(SandboxError, match="cannot create the sandbox here .*unprivileged user namespaces"):
        Worker.start(LIMITS, source="def score():\n    return 1\n")


def test_an_unreadable_opt_in_value_is_refused(no_bwrap, monkeypatch):
    monkeypatch.setenv(ALLOW_WEAK_ENV, "sure")
    with pytest.raises(SandboxError, match=f"{ALLOW_WEAK_ENV}='sure': expected 1 or 0"):
        Worker.start(LIMITS, source="def score():\n    return 1\n")


def test_with_the_opt_in_the_weak_fallback_runs_and_still_blocks_the_socket_module(no_bwrap, monkeypatch):
    monkeypatch.setenv(ALLOW_WEAK_ENV, "1")
    source = "import socket\ndef score():\n    socket.create_connection(('127.0.0.1', 5432), timeout=1)\n    return 1\n"
    result = call_once(source)
    assert not result.ok
    assert "network access is disabled in the sandbox" in result.error
    assert call_once("import os\ndef score():\n    return os.getpid() != 1\n").value is True  # a plain process
