"""The python criterion runs user code in a sandbox worker: misbehaving code costs its own sample a
zero with the reason, never the other samples, the other criteria, or the process running the rubric."""

import os
import textwrap
import time

import pytest
from pydantic import ValidationError

from tests.trainers.rewards.helpers import sample
from trainers.rewards.catalog import PythonParams
from trainers.rewards.criteria.python import Python
from trainers.rewards.rubric import Rubric
from trainers.sandbox.process import HIDE_ENV, isolation

# Each misbehaviour is triggered by the completion text, so one batch mixes good and bad samples.
USER_CODE = textwrap.dedent(
    """
    import os
    import random

    LOADED = random.getrandbits(64)  # differs between worker processes (PIDs may not: PID namespaces)

    def score(prompt, completion, **fields):
        if completion == "raise":
            raise ValueError("cannot score this")
        if completion == "loop":
            while True:
                pass
        if completion == "allocate":
            x = []
            while True:
                x.append(" " * 10**7)
        if completion == "exit":
            os._exit(3)
        if completion == "segfault":
            import ctypes
            ctypes.string_at(0)
        if completion == "sys_exit":
            raise SystemExit(2)
        if completion == "network":
            import socket
            socket.create_connection(("127.0.0.1", 5432), timeout=1)
        if completion == "pid":
            return 1.0, f"{os.getpid()} {LOADED}"
        return float(completion == fields["answer"]), f"compared with {fields['answer']}"
    """
)
TIMEOUT_S = 2.0  # generous: allocating up to the memory limit must finish first on a loaded CI machine


def rubric(code: str = USER_CODE, **params) -> Rubric:
    return Rubric.from_spec(
        {
            "criteria": [
                {
                    "name": "user",
                    "kind": "python",
                    "params": {"code": code, "timeout_s": TIMEOUT_S, "memory_mb": 256, **params},
                },
                {"name": "length", "kind": "length", "weight": 0.5, "params": {"target_max": 100}},
            ]
        }
    )


def score_around(bad: str) -> tuple[list, float]:
    """Score [good, bad, good] and time it."""
    started = time.monotonic()
    results = rubric().score([sample("42", answer="42"), sample(bad, answer="42"), sample("41", answer="42")])
    return results, time.monotonic() - started


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("raise", "ValueError: cannot score this (line 9)"),
        ("loop", "timed out after 2 s"),
        ("allocate", "MemoryError"),
        ("exit", "the sandbox process died: exited with code 3"),
        ("segfault", "the sandbox process died: segmentation fault (SIGSEGV)"),
        ("sys_exit", "SystemExit: 2"),
    ],
)
def test_a_misbehaving_call_scores_zero_and_its_neighbours_are_still_scored(bad, error):
    results, seconds = score_around(bad)
    good, broken, wrong = (r.scores["user"] for r in results)
    assert (good.score, good.error, good.explanation) == (1.0, None, "compared with 42")
    assert (wrong.score, wrong.error) == (0.0, None)
    assert broken.score == 0.0
    assert broken.error.startswith(error), broken.error
    # The other criterion still counts for the broken sample: 0 + 0.5 * 1
    assert results[1].reward == 0.5
    assert seconds < TIMEOUT_S + 4


def test_the_worker_is_replaced_after_a_crash_and_reused_otherwise():
    results = rubric().score([sample(c, answer="x") for c in ("pid", "pid", "exit", "pid")])
    loads = [r.scores["user"].explanation for r in results]
    assert loads[0] == loads[1]  # one process loaded the code once and scored both
    assert loads[3] != loads[0]  # a fresh one after os._exit
    assert loads[0].split()[0] != str(os.getpid())  # never in this process


def test_user_code_has_no_network():
    [result] = rubric().score([sample("network", answer="42")])
    assert result.scores["user"].score == 0.0
    # In a fresh network namespace the connection fails at the OS; without one the socket module refuses.
    assert any(
        reason in result.scores["user"].error for reason in ("network access is disabled", "Network is unreachable")
    ), result.scores["user"].error


# What the inspector would show the whole team, if the sandbox let the code read it.
READ_SECRET = """
def score(prompt, completion, **fields):
    with open(fields["path"]) as f:
        return 1.0, f.read()
"""


@pytest.mark.skipif(isolation() != "bubblewrap", reason="bubblewrap cannot run here")
def test_user_code_cannot_read_the_workers_files(tmp_path, monkeypatch):
    # A token under the worker user's home, the studio's data folder, and the system's passwords.
    token = tmp_path / "home" / ".cache" / "huggingface" / "token"
    token.parent.mkdir(parents=True)
    token.write_text("hf_do_not_leak")
    data = tmp_path / "var"
    data.mkdir()
    (data / "secret_key").write_text("do not show")
    monkeypatch.setenv("HOME", str(token.parents[2]))
    monkeypatch.setenv(HIDE_ENV, str(data))
    paths = [str(token), str(data / "secret_key"), "/etc/shadow"]
    results = rubric(READ_SECRET).score([sample("x", path=p) for p in paths])
    for path, result in zip(paths, results, strict=True):
        assert result.scores["user"].score == 0.0
        assert result.scores["user"].error.startswith("FileNotFoundError"), (path, result.scores["user"].error)
    assert token.read_text() == "hf_do_not_leak"  # readable here: the sandbox, not the file, stopped it


def test_user_code_may_import_installed_packages():
    code = "import numpy, sympy\n\ndef score(prompt, completion, **fields):\n    return float(numpy.mean([0, 1])), str(sympy.simplify('x + x'))\n"
    [result] = rubric(code).score([sample("x")])
    assert (result.scores["user"].score, result.scores["user"].explanation) == (0.5, "2*x")


def test_the_calling_process_keeps_working_after_every_failure():
    for bad in ("loop", "allocate", "exit", "segfault"):
        score_around(bad)
    [result] = rubric().score([sample("42", answer="42")])
    assert result.scores["user"].score == 1.0
    assert [1] * 10**6 == [1] * 10**6  # and can still allocate


def test_code_that_fails_to_load_gives_every_sample_the_reason():
    code = "import no_such_module_xyz\n\ndef score(prompt, completion, **fields):\n    return 1.0\n"
    results = rubric(code).score([sample("a"), sample("b")])
    for r in results:
        assert r.scores["user"].score == 0.0
        assert "ModuleNotFoundError: No module named 'no_such_module_xyz' (line 1)" in r.scores["user"].error


def test_a_syntax_error_that_reaches_the_sandbox_names_its_line():
    # The catalog refuses syntax errors at validation; build past it to check the sandbox says the same.
    params = PythonParams.model_construct(
        code="def score(prompt, completion):\n    return (1\n", timeout_s=2.0, memory_mb=256
    )
    [result] = Python(params).score_batch([sample("a")])
    assert result.error.startswith("SyntaxError at line 2:"), result.error


def test_the_catalog_refuses_a_syntax_error_with_its_line():
    with pytest.raises(ValidationError, match="syntax error at line 3"):
        PythonParams(code="def score(prompt, completion):\n    x = 1\n    return x +\n")


def test_the_catalog_refuses_code_without_a_score_function():
    with pytest.raises(ValidationError, match="must define a top-level function score"):
        PythonParams(code="def grade(prompt, completion):\n    return 1\n")


@pytest.mark.parametrize(
    ("returned", "score", "explanation", "error"),
    [
        ("0.25", 0.25, "score() returned 0.25", None),
        ("True", 0.0, "", "score() returned True; expected a number or (number, explanation)"),
        ("(3, 'three')", 3.0, "three", None),
        ("'high'", 0.0, "", "score() returned 'high'; expected a number or (number, explanation)"),
        ("float('nan')", 0.0, "", "score() returned nan"),
    ],
)
def test_it_checks_what_score_returns(returned, score, explanation, error):
    code = f"def score(prompt, completion, **fields):\n    return {returned}\n"
    [result] = rubric(code).score([sample("a")])
    got = result.scores["user"]
    assert (got.score, got.error) == (score, error)
    if explanation:
        assert got.explanation == explanation


def test_fields_and_chat_prompts_reach_the_function():
    code = (
        "def score(prompt, completion, answer, topic):\n    return 1.0, f'{prompt[0][\"content\"]}|{answer}|{topic}'\n"
    )
    s = sample("c", prompt=[{"role": "user", "content": "hi"}], answer="a", topic="t")
    [result] = rubric(code).score([s])
    assert result.scores["user"].explanation == "hi|a|t"


def test_code_that_hangs_again_and_again_is_given_up_on_for_the_rest_of_the_batch():
    hangs = "def score(prompt, completion, **fields):\n    while True:\n        pass\n"
    started = time.monotonic()
    results = rubric(hangs, timeout_s=1.0).score([sample(str(i)) for i in range(8)])
    seconds = time.monotonic() - started
    errors = [r.scores["user"].error for r in results]
    assert all(e.startswith("timed out after 1 s") for e in errors[:3]), errors
    assert all(e.startswith("not run: the code timed out on 3 calls in a row") for e in errors[3:]), errors
    assert seconds < 3 * (1.0 + 2.0) + 3  # three timeouts (with start-up), not eight


def test_timeouts_between_answers_do_not_count_towards_giving_up():
    code = "def score(prompt, completion, **fields):\n    while completion == 'hang':\n        pass\n    return 1.0\n"
    completions = ["hang", "ok", "hang", "ok", "hang", "ok", "hang"]
    results = rubric(code, timeout_s=1.0).score([sample(c) for c in completions])
    errors = [r.scores["user"].error for r in results]
    assert [e is None for e in errors] == [c == "ok" for c in completions], errors
    assert all(e.startswith("timed out") for e in errors if e), errors


def test_a_score_function_naming_transcript_receives_a_multi_turn_episodes_conversation():
    from trainers.rewards.sample import Sample

    transcript = [{"role": "assistant", "content": "<tool_call>x</tool_call>"}, {"role": "tool", "content": "7"}]
    episode = Sample(prompt="p", completion="7", fields={}, transcript=transcript)
    reads = Python(
        PythonParams(code="def score(prompt, completion, transcript=None):\n    return len(transcript or [])\n")
    )
    assert [s.score for s in reads.score_batch([episode, sample("7")])] == [2.0, 0.0]
    # Written before transcripts existed: called exactly as before (no transcript among its fields).
    older = Python(PythonParams(code="def score(prompt, completion, **fields):\n    return len(fields)\n"))
    [score] = older.score_batch([episode])
    assert score.error is None and score.score == 0.0
