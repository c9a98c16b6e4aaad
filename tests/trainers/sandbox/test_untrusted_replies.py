"""What comes back from a sandbox is untrusted (issue 23), checked on real workers:

- the host never opens anything in the sandbox's folder: code that plants a symbolic link, a
  FIFO or a link to /dev/zero where a log could be, then dies, gets its death described (with
  what it printed) at once, and nothing of the host's files in it;
- replies cannot be forged: lines written onto the reply pipe never shift a later call's reply;
- a reply that is not the protocol ends its call with the reason, and the next call works;
- the sandbox's folder and /tmp share a disk quota, and what a call prints never fills a limit
  that later calls would hit.
"""

import os
import time

import pytest

from trainers.sandbox import process as sandbox
from trainers.sandbox.process import LOG_TAIL, Limits, Worker, WorkerPool
from trainers.sandbox.programs import run_program_tests

LIMITS = Limits(timeout_s=3.0, memory_mb=256)
needs_bubblewrap = pytest.mark.skipif(sandbox.isolation() != "bubblewrap", reason="bubblewrap cannot run here")

PLANTER = """
import os, sys
def score(what, target=""):
    if what == "ok":
        return "fine"
    for name in (".sandbox-log", "log", "/tmp/.sandbox-log"):
        if what == "symlink":
            os.symlink(target, name)
        elif what == "fifo":
            os.mkfifo(name)
        elif what == "zero":
            os.symlink("/dev/zero", name)
    sys.stderr.write("last words\\n")
    sys.stderr.flush()
    os._exit(3)
"""


@pytest.mark.parametrize("what", ["symlink", "fifo", "zero"])
def test_a_worker_that_plants_files_where_its_log_was_and_dies_is_described_at_once(tmp_path, what):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("hf_planted_token")
    with WorkerPool(LIMITS, 2, source=PLANTER) as pool:
        began = time.monotonic()
        died = pool.call(what, str(secret))
        took = time.monotonic() - began
        assert not died.ok and died.crashed
        assert "exited with code 3" in died.error and "last words" in died.error, died.error
        assert "hf_planted_token" not in died.error
        assert took < 2.5, took  # no FIFO waited on, no /dev/zero read
        assert pool.call("ok").value == "fine"  # a fresh worker takes the next call
    assert secret.read_text() == "hf_planted_token"


def test_a_flood_on_the_log_keeps_only_its_tail_and_never_blocks_a_call():
    source = (
        "import os\ndef score(die):\n"
        "    for _ in range(50):\n        os.write(2, b'y' * (1 << 20))\n"
        "    os.write(2, b'the end')\n"
        "    if die:\n        os._exit(4)\n    return 'done'\n"
    )
    with WorkerPool(Limits(timeout_s=10.0, memory_mb=256), 3, source=source) as pool:
        assert pool.call(False).value == "done"  # 50 MB on stderr during a call: drained, not a deadlock
        died = pool.call(True)
        assert died.crashed and died.error.endswith("the end") and "exited with code 4" in died.error
        assert len(died.error) < LOG_TAIL + 200
        assert pool.call(False).value == "done"


FORGER = """
import os, sys, threading

def forge(tag):
    lines = [b'\\n{"ok": true, "value": "forged"}\\n', b'no newline, then garbage {"ok": tr']
    if tag:
        lines.append(b'\\n' + tag.encode() + b' {"ok": true, "value": "forged"}\\n')
    for fd in range(3, 64):
        for line in lines:
            try:
                os.write(fd, line)
            except OSError:
                pass

def score(n):
    if n == 1:
        tag = sys._getframe(1).f_locals["request"]["id"]  # this call's tag: the strongest forger knows it
        forge(tag)
        forge(tag)  # an extra reply for this call: the one that would shift every later reply
        def keep_forging():
            while True:
                forge(tag)  # the stale tag and untagged lines, all through the later calls
                time.sleep(0.001)
        import time
        threading.Thread(target=keep_forging, daemon=True).start()
    return f"real-{n}"
"""


def test_lines_forged_onto_the_reply_pipe_never_shift_a_later_reply():
    worker = Worker.start(LIMITS, source=FORGER)
    try:
        first = worker.call(1)
        assert first.ok and first.value in ("forged", "real-1")  # at most it answers its own call
        assert [worker.call(n).value for n in range(2, 8)] == [f"real-{n}" for n in range(2, 8)]
    finally:
        worker.close()


REBINDER = """
import json, sys
def score(how):
    if how == "dumps":
        json.dumps = lambda *a, **k: "[1, 2]"  # the interpreter's own serialiser, rebound
    elif how == "huge":
        return "x" * (12 << 20)
    elif how == "deep":
        value = []
        for _ in range(100_000):
            value = [value]
        return value
    elif how == "surrogate":
        return "a\\ud800b"
    return "fine"
"""


@pytest.mark.parametrize("how", ["dumps", "huge", "deep", "surrogate"])
def test_a_rebound_serialiser_or_an_oversized_value_ends_only_its_call(how):
    with WorkerPool(Limits(timeout_s=5.0, memory_mb=512), 3, source=REBINDER) as pool:
        result = pool.call(how)
        if how == "dumps":  # the child kept its own json.dumps: nothing changed for the host
            assert result.ok and result.value == "fine"
        elif how == "surrogate":
            assert result.ok and result.value == "a\ud800b"  # plain JSON text: the tools make it encodable
        else:
            assert not result.ok and (
                "more than a reply holds" in result.error or "cannot be sent back" in result.error
            )
            assert len(result.error) < 500, result.error
        assert pool.call("ok").value == "fine"


def test_a_reply_that_breaks_the_protocol_stops_its_worker_with_the_reason():
    # Code that reaches the reply pipe and writes a tagged line that is not a reply object.
    source = (
        "import os, sys\ndef score(how):\n"
        "    if how == 'ok':\n        return 'fine'\n"
        "    tag = sys._getframe(1).f_locals['request']['id']\n"
        "    body = {'list': b'[1, 2]', 'text': b'not json', 'shape': b'{\"ok\": \"yes\"}'}[how]\n"
        "    for fd in range(3, 64):\n"
        "        try:\n            os.write(fd, b'\\n' + tag.encode() + b' ' + body + b'\\n')\n"
        "        except OSError:\n            pass\n"
        "    import time\n    time.sleep(5)\n"
    )
    with WorkerPool(LIMITS, 8, source=source) as pool:
        for how, said in (("list", "JSON list"), ("text", "not valid JSON"), ("shape", "without a boolean 'ok'")):
            result = pool.call(how)
            assert not result.ok and result.crashed and said in result.error, result.error
            assert pool.call("ok").value == "fine"


def test_a_reply_line_larger_than_the_limit_stops_its_worker(monkeypatch):
    monkeypatch.setattr(sandbox, "MAX_REPLY_BYTES", 1 << 20)
    source = (
        "import os\ndef score(big):\n    if big:\n"
        "        for fd in range(3, 64):\n"
        "            try:\n                os.write(fd, b'z' * (3 << 20))\n"
        "            except OSError:\n                pass\n"
        "    return 'fine'\n"
    )
    with WorkerPool(LIMITS, 3, source=source) as pool:
        result = pool.call(True)
        assert result.crashed and "a reply larger than 1 MiB" in result.error, result.error
        assert pool.call(False).value == "fine"


@needs_bubblewrap
def test_the_working_folder_and_tmp_share_a_disk_quota_and_the_worker_goes_on():
    source = (
        "import os\ndef score(fill):\n"
        "    if not fill:\n"
        "        for folder in ('.', '/tmp'):\n"
        "            for name in os.listdir(folder):\n"
        "                if name.startswith('part'):\n                    os.remove(os.path.join(folder, name))\n"
        "        open('small', 'w').write('ok')\n        return open('small').read()\n"
        "    written = 0\n"
        "    try:\n"
        "        for i in range(100):\n"
        "            with open(('.' if i % 2 else '/tmp') + f'/part{i}', 'wb') as f:\n"
        "                f.write(b'x' * (1 << 20))\n"
        "            written += 1 << 20\n"
        "    except OSError as exc:\n        return [written, exc.strerror]\n"
        "    return [written, None]\n"
    )
    worker = Worker.start(Limits(timeout_s=5.0, memory_mb=256, disk_mb=8), source=source)
    try:
        written, error = worker.call(True).value
        assert written <= 8 << 20 and error == "No space left on device", (written, error)
        assert worker.call(False).value == "ok"
    finally:
        worker.close()


def test_printing_past_the_file_size_limit_does_not_fail_later_calls():
    # What user code prints goes to the log pipe (no file, so no RLIMIT_FSIZE on it): a call that
    # printed more than `file_size_mb` leaves nothing behind for the next one to fail on.
    limits = Limits(timeout_s=5.0, memory_mb=256, file_size_mb=1)
    source = "def score(n):\n    print('p' * n)\n    return n\n"
    worker = Worker.start(limits, source=source)
    try:
        assert worker.call(3_000_000).value == 3_000_000
        assert worker.call(5).value == 5
    finally:
        worker.close()


def test_a_program_cannot_write_the_verdicts_of_its_tests():
    # The program runs only in the forked test processes, which hold no protocol pipe (and the
    # process that does is closed to them through /proc): a forged "passed" line never arrives.
    forger = (
        "import os, json\n"
        "for pid in ('self', str(os.getppid())):\n"
        "    for fd in range(3, 64):\n"
        "        for i in range(3):\n"
        "            line = json.dumps({'test': i, 'passed': True}).encode()\n"
        "            try:\n"
        "                w = os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY) if pid != 'self' else fd\n"
        "                os.write(w, b'\\n' + line + b'\\n')\n"
        "            except OSError:\n"
        "                pass\n"
        "def f(x):\n    return -1\n"
    )
    tests = [f"assert f({i}) == {i}" for i in range(3)]
    run = run_program_tests(forger, tests, "asserts", Limits(timeout_s=5.0, memory_mb=256))
    assert run.fatal is None and not run.timed_out, run
    assert [run.results[i]["passed"] for i in range(3)] == [False, False, False], run.results
    good = run_program_tests("def f(x):\n    return x\n", tests, "asserts", Limits(timeout_s=5.0, memory_mb=256))
    assert all(good.results[i]["passed"] for i in range(3)), good


def test_the_host_keeps_no_folder_of_a_bubblewrapped_sandbox(tmp_path):
    if sandbox.isolation() != "bubblewrap":
        pytest.skip("bubblewrap cannot run here")
    worker = Worker.start(LIMITS, source="import os\ndef score():\n    return os.getcwd()\n")
    try:
        cwd = worker.call().value
        assert cwd.startswith("/tmp/rubric-sandbox-") and not os.path.exists(cwd)  # it lives in the sandbox only
    finally:
        worker.close()
