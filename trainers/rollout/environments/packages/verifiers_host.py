"""The host side of a verifiers environment: one sandboxed process per run (per package and config)
holding the loaded taskset, and the checks on everything it returns.

Importing verifiers 0.4 takes seconds of CPU (8 s here, 20 s of wall clock on a busy machine), so
the process is started once and shared: by the run's preparation (its tasks as the prompts) and by
every criterion scoring with it. It is a sandbox worker (trainers.sandbox.process) started with the
package's own python, under the run's limits for it (`memory_mb`, `load_timeout_s` to load,
`score_timeout_s` a batch), no network, nothing of the host's files but /usr, the interpreter and
that virtual environment. A sandbox worker must be called from the thread that started it, so one
thread of its own makes every call (`_calls`); callers from any thread wait on it.

What comes back is checked here for type and size (`VerifiersError` when the shape is wrong): texts
exact str and cut to `MAX_CHARS`, scores finite numbers, at most `MAX_NAMES` names. A batch that hung
or killed the process scores that batch 0 with the reason; the next batch starts a fresh process.
"""

from __future__ import annotations

import atexit
import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.rollout.environments import bounds
from trainers.rollout.environments.catalog import VerifiersParams
from trainers.rollout.environments.packages.venvs import InstalledPackage, ensure_installed
from trainers.sandbox.process import Limits, SandboxError, WorkerPool

CHILD = Path(__file__).with_name("_verifiers_child.py")
MAX_CHARS = 20_000  # a prompt's message, an answer
MAX_NAMES = 64
# Calls the process may answer before its CPU-time backstop: the wall clock of each is the real limit.
CALLS = 100_000
ROLES = ("system", "user", "assistant")


class VerifiersError(RuntimeError):
    """The environment could not be loaded or answered what cannot be used; the message says why."""


@dataclass
class Description:
    """What the taskset scores with: reward functions and weights (in the task's order), metrics."""

    rewards: list[tuple[str, float]]
    metrics: list[str]
    tasks: int


@dataclass
class Scored:
    """One sample's verdict: each reward's (score, weight), each metric, or the task's error."""

    rewards: dict[str, tuple[float, float]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""


class VerifiersHost:
    def __init__(self, params: VerifiersParams, package: InstalledPackage) -> None:
        self.params = params
        self.package = package
        config = {"module": params.module(), "config": params.config, "max_rows": params.max_rows,
                  "max_chars": MAX_CHARS}  # fmt: skip
        source = f"CONFIG_JSON = {json.dumps(json.dumps(config))}\n" + CHILD.read_text()
        limits = Limits(timeout_s=params.score_timeout_s, memory_mb=params.memory_mb,
                        load_timeout_s=params.load_timeout_s, disk_mb=64)  # fmt: skip
        self._calls = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verifiers")
        self._pool = WorkerPool(limits, CALLS, give_up_after_timeouts=2, source=source, function="handle",
                                filename="<verifiers environment>", python=package.python)  # fmt: skip
        self._last: tuple[tuple, list[Scored]] | None = None  # the last batch: every criterion scores the same one
        self._description: Description | None = None

    # ------------------------------------------------------------------ calls

    def _call(self, method: str, argument: Any = None) -> Any:
        def call() -> Any:
            try:
                outcome = self._pool.call(method, argument)
            except SandboxError as exc:  # did not load: every call says the same
                raise VerifiersError(f"the verifiers environment {self.params.package} did not load: {exc}") from None
            if not outcome.ok:
                raise VerifiersError(f"the verifiers environment's {method} failed: {outcome.error}")
            return outcome.value

        return self._calls.submit(call).result()

    def describe(self) -> Description:
        if self._description is None:
            value = self._call("describe")
            if not isinstance(value, dict):
                raise VerifiersError(f"describe answered {type(value).__name__}, not an object")
            rewards = [(_name(n), _finite(w, "a reward's weight")) for n, w in _pairs(value.get("rewards"))]
            metrics = [_name(n) for n in _list(value.get("metrics"))]
            self._description = Description(rewards, metrics, _count(value.get("tasks")))
        return self._description

    def rows(self) -> list[dict[str, Any]]:
        """Each task as {"messages", "answer", "verifiers_task": its index}: checked, cut, at most max_rows."""
        value = self._call("rows")
        if not isinstance(value, list):
            raise VerifiersError(f"rows answered {type(value).__name__}, not a list")
        out = []
        for index, row in enumerate(value[: self.params.max_rows]):
            if not isinstance(row, dict):
                raise VerifiersError(f"task {index} came back as {type(row).__name__}, not an object")
            out.append({"messages": _messages(row.get("messages"), index), "answer": _text(row.get("answer", "")),
                        "verifiers_task": index})  # fmt: skip
        if not out:
            raise VerifiersError("the taskset has no task")
        return out

    def score(self, items: list[tuple[int, str]]) -> list[Scored]:
        """(task index, completion) -> its verdict, in order; one sandbox call for the whole batch (the same
        batch asked again, by the next criterion, is answered from the last one)."""
        key = tuple(items)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        try:
            value = self._call("score", [{"task": t, "completion": c} for t, c in items])
        except VerifiersError as exc:
            found = [Scored(error=str(exc))] * len(items)
        else:
            if not isinstance(value, list) or len(value) != len(items):
                found = [Scored(error="the environment answered the batch with something else than a verdict each")]
                found *= len(items)
            else:
                found = [_scored(v) for v in value]
        self._last = (key, found)
        return found

    def close(self) -> None:
        try:
            self._calls.submit(self._pool.close).result()
        except RuntimeError:  # at exit, the executors' own hook stopped its thread first: kill from here
            self._pool.close()
        self._calls.shutdown(wait=True)


# ------------------------------------------------------------------ one host per package and config

_HOSTS: dict[str, VerifiersHost] = {}
_LOCK = threading.Lock()


def host_for(params: VerifiersParams, log=lambda line: None) -> VerifiersHost:
    """The run's host for these settings, installed and started on first use (kept for the process's
    life: loading costs seconds, and the run's criteria and its preparation share it)."""
    key = json.dumps(params.model_dump(mode="json"), sort_keys=True)
    with _LOCK:
        if key not in _HOSTS:
            _HOSTS[key] = VerifiersHost(params, ensure_installed(params.package, params.version, log))
        return _HOSTS[key]


@atexit.register
def close_hosts() -> None:
    with _LOCK:
        for host in _HOSTS.values():
            host.close()
        _HOSTS.clear()


# ------------------------------------------------------------------ checks on what came back


def _text(value: Any, limit: int = MAX_CHARS) -> str:
    if type(value) is not str:
        raise VerifiersError(f"a text came back as {type(value).__name__}")
    return bounds.short(value, limit, "a text")


def _name(value: Any) -> str:
    text = _text(value, 200)
    if not text.isidentifier():
        raise VerifiersError(f"the name {text[:60]!r} is not an identifier")
    return text


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise VerifiersError(f"{what} came back as {str(value)[:60]!r}, not a finite number")
    return float(value)


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise VerifiersError("the number of tasks is not a count")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise VerifiersError(f"a list came back as {type(value).__name__}")
    return value[:MAX_NAMES]


def _pairs(value: Any) -> list[tuple[Any, Any]]:
    pairs = _list(value)
    if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise VerifiersError("the rewards came back in another shape than [name, weight] pairs")
    return [(p[0], p[1]) for p in pairs]


def _messages(value: Any, index: int) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise VerifiersError(f"task {index} has no prompt messages")
    out = []
    for message in value[:64]:
        if not (isinstance(message, dict) and message.get("role") in ROLES):
            raise VerifiersError(f"task {index}: a message in another shape than {{'role': one of {ROLES}, ...}}")
        out.append({"role": message["role"], "content": _text(message.get("content"))})
    return out


def _scored(value: Any) -> Scored:
    """One sample's verdict, or a verdict whose error says what was wrong with it."""
    try:
        if not isinstance(value, dict):
            raise VerifiersError(f"a verdict came back as {type(value).__name__}")
        rewards, metrics = value.get("rewards"), value.get("metrics")
        if not isinstance(rewards, dict) or not isinstance(metrics, dict):
            raise VerifiersError("a verdict without its rewards and metrics")
        found = Scored(error=_text(value.get("error", ""), 2000))
        for name, pair in list(rewards.items())[:MAX_NAMES]:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise VerifiersError(f"the reward {str(name)[:60]!r} came back in another shape than [score, weight]")
            found.rewards[_name(name)] = (_finite(pair[0], f"reward {name}"), _finite(pair[1], f"weight of {name}"))
        for name, number in list(metrics.items())[:MAX_NAMES]:
            found.metrics[_name(name)] = _finite(number, f"metric {name}")
        return found
    except VerifiersError as exc:
        return Scored(error=str(exc))
